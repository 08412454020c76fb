"""Unit conversions for a weather station."""
