"""One way to keep secrets out of text and data: every known secret value is replaced,
longest first (so a secret that contains another is never half-replaced)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "[REDACTED]"


class Redactor:
    """Replaces secret values in strings, and recursively through plain data."""

    def __init__(self, values: Iterable[str], *, marker: str = REDACTED, min_len: int = 1):
        self.values = sorted({v for v in values if v and len(v) >= min_len}, key=len, reverse=True)
        self.marker = marker

    def text(self, s: str) -> str:
        for v in self.values:
            if v in s:
                s = s.replace(v, self.marker)
        return s

    __call__ = text

    def data(self, obj: Any) -> Any:
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, Mapping):
            return {self.text(str(k)): self.data(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self.data(v) for v in obj]
        return obj

    def __repr__(self) -> str:  # never the values themselves
        return f"Redactor({len(self.values)} secrets)"
