"""Pages of a list. Page numbers are 1-based, as users see them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def page_count(total: int, per_page: int) -> int:
    if per_page < 1:
        raise ValueError("per_page must be at least 1")
    return -(-total // per_page)


def paginate(items: Sequence[T], page: int, per_page: int) -> list[T]:
    """The items on ``page`` (1-based); an empty list past the last page."""
    if page < 1:
        raise ValueError("pages are numbered from 1")
    if per_page < 1:
        raise ValueError("per_page must be at least 1")
    start = page * per_page
    return list(items[start : start + per_page])
