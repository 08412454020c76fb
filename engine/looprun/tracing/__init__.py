"""Opt-in OpenTelemetry traces of a run, built from what its ports record."""
