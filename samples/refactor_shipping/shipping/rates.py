"""Shipping rates in cents; the weight surcharge is computed in two places."""


def domestic_cost(weight_grams: int) -> int:
    base = 450
    if weight_grams > 1000:
        extra_kilos = (weight_grams - 1000 + 999) // 1000
        base += extra_kilos * 120
    return base


def international_cost(weight_grams: int, zone: int) -> int:
    base = 900 + 300 * zone
    if weight_grams > 1000:
        extra_kilos = (weight_grams - 1000 + 999) // 1000
        base += extra_kilos * 120
    return base
