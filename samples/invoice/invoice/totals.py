"""Invoice totals. Amounts are integer cents, so rounding is explicit."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Line:
    description: str
    quantity: int
    unit_price_cents: int


def subtotal_cents(lines: list[Line]) -> int:
    return sum(line.quantity * line.unit_price_cents for line in lines)


def average_unit_price_cents(lines: list[Line]) -> int:
    """The subtotal spread over every unit sold, rounded to the nearest cent."""
    units = sum(line.quantity for line in lines)
    return round(subtotal_cents(lines) / units)


def tax_cents(lines: list[Line], rate_percent: int) -> int:
    return round(subtotal_cents(lines) * rate_percent / 100)


def summary(lines: list[Line], rate_percent: int = 20) -> dict[str, int]:
    sub = subtotal_cents(lines)
    tax = tax_cents(lines, rate_percent)
    return {
        "subtotal": sub,
        "tax": tax,
        "total": sub + tax,
        "average_unit_price": average_unit_price_cents(lines),
    }
