"""Shipping costs for parcels."""

from shipping.rates import domestic_cost, international_cost

__all__ = ["domestic_cost", "international_cost"]
