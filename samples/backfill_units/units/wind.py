"""Wind speed conversions."""


def kmh_to_knots(kmh: float) -> float:
    return round(kmh / 1.852, 1)


def beaufort(kmh: float) -> int:
    limits = [1, 6, 12, 20, 29, 39, 50, 62, 75, 89, 103, 118]
    for force, upper in enumerate(limits):
        if kmh < upper:
            return force
    return 12
