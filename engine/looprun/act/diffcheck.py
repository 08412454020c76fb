"""Reading a unified git diff for the policy: changed-line counts and added lines.

The patch itself is read by :mod:`looprun.data.patchtext`, the reader the ``git_diff``
observer uses too, so the two never disagree on what a change adds.
"""

from __future__ import annotations

from collections.abc import Iterator

from looprun.data.patchtext import git_header_paths, lines, walk
from looprun.data.value import valueclass


@valueclass
class AddedLine:
    """A line the diff adds, where forbidden patterns are looked for."""

    path: str
    line: int  # 1-based line number in the new file
    text: str


@valueclass
class DiffStats:
    """Files and line counts of a diff, checked against max_diff_lines."""

    files: tuple[str, ...]
    added: int
    removed: int

    @property
    def lines(self) -> int:
        return self.added + self.removed


def stats(diff_text: str) -> DiffStats:
    files: dict[str, None] = {}
    added = removed = 0
    for kind, path, _, _ in walk(diff_text):
        files[path] = None
        if kind == "+":
            added += 1
        else:
            removed += 1
    return DiffStats(tuple(files), added, removed)


def added_lines(diff_text: str) -> Iterator[AddedLine]:
    for kind, path, line, text in walk(diff_text):
        if kind == "+":
            yield AddedLine(path, line, text)


def changed_paths(diff_text: str) -> list[str]:
    """Every path a git diff touches, old and new names, including files without line
    changes (empty, binary, mode-only) that ``stats`` does not see."""
    out: dict[str, None] = {}
    for line in lines(diff_text):
        paths = git_header_paths(line)
        if paths:
            out[paths[0]] = None
            out[paths[1]] = None
    return list(out)
