"""Split a sequence into numbered pages (page numbers start at 1)."""

from pagination.pages import page_count, paginate

__all__ = ["page_count", "paginate"]
