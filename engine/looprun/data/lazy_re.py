"""A regular expression compiled on first use.

Every run imports the parsers' helpers, but only a run whose check fails reads a
traceback: compiling those patterns at import is start-up time spent for nothing. Once
compiled, the pattern's methods become the object's own attributes, so a call costs what
the same call on ``re.compile``'s result costs (no lookup through ``__getattr__`` again).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

_METHODS = ("match", "fullmatch", "search", "finditer", "findall", "sub", "subn", "split")


class LazyPattern:
    """``re.compile(pattern, flags)``, done the first time a method is asked for."""

    match: Callable[..., re.Match[str] | None]
    fullmatch: Callable[..., re.Match[str] | None]
    search: Callable[..., re.Match[str] | None]
    finditer: Callable[..., Iterator[re.Match[str]]]
    findall: Callable[..., list[Any]]
    sub: Callable[..., str]
    subn: Callable[..., tuple[str, int]]
    split: Callable[..., list[str | Any]]

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._source = (pattern, flags)

    @property
    def compiled(self) -> re.Pattern[str]:
        return re.compile(*self._source)  # re's own cache: compiled once

    def __getattr__(self, name: str) -> Any:
        if name not in _METHODS:
            raise AttributeError(name)
        compiled = self.compiled
        for method in _METHODS:
            setattr(self, method, getattr(compiled, method))
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"LazyPattern({self._source[0]!r}, {self._source[1]!r})"
