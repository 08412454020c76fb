"""Gitignore-style glob matching (``**`` understood), one meaning for every caller.

The expression language (``matching``, ``confined``) and the parsers that filter paths
(git_diff's ``allow``/``deny``, coverage's ``paths``) share it, so a glob a template
writes selects the same files wherever it is read; parsers get it without loading the
expression engine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable


def matcher(globs: Iterable[str]) -> Callable[[str], bool]:
    """A test of one path against the globs (a path matches when any glob does)."""
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(globs).match_file


def matching(paths: Iterable[str] | None, *globs: str) -> list[str]:
    """Paths among ``paths`` that match any glob, order kept."""
    if not paths:
        return []
    match = matcher(globs)
    return [p for p in paths if match(p)]
