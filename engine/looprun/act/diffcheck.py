"""Reading a unified git diff for the policy: changed-line counts and added lines.

Hunks are read by their header counts, so an added line that happens to start with
``+++`` is still an added line, not a file header.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


@dataclass(frozen=True)
class AddedLine:
    """A line the diff adds, where forbidden patterns are looked for."""

    path: str
    line: int  # 1-based line number in the new file
    text: str


@dataclass(frozen=True)
class DiffStats:
    """Files and line counts of a diff, checked against max_diff_lines."""

    files: tuple[str, ...]
    added: int
    removed: int

    @property
    def lines(self) -> int:
        return self.added + self.removed


def unquote_path(raw: str) -> str:
    """Undo git's C-style quoting of a path (``"a\\tb"``, octal bytes)."""
    if not (len(raw) >= 2 and raw[0] == '"' and raw[-1] == '"'):
        return raw
    out = bytearray()
    body = raw[1:-1]
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
                i += 2
                continue
            if body[i + 1 : i + 4].isdigit():
                out.append(int(body[i + 1 : i + 4], 8) & 0xFF)
                i += 4
                continue
        out += c.encode("utf-8")
        i += 1
    return out.decode("utf-8", "replace")


def _header_path(line: str) -> str | None:
    raw = line[4:].rstrip("\n")
    if raw.endswith("\t"):  # git marks a name containing spaces with a trailing tab
        raw = raw[:-1]
    if raw == "/dev/null":
        return None
    path = unquote_path(raw)
    return path[2:] if path[:2] in ("a/", "b/") else path


def walk(diff_text: str) -> Iterator[tuple[str, str, int, str]]:
    """Yield ``(kind, path, new_line, text)`` for each ``+``/``-`` line of every hunk."""
    old_path: str | None = None
    path: str | None = None
    old_left = new_left = 0
    new_line = 0
    for line in diff_text.splitlines():
        if old_left > 0 or new_left > 0:
            tag, text = line[:1], line[1:]
            if tag == "+":
                new_left -= 1
                yield "+", path or old_path or "", new_line, text
                new_line += 1
            elif tag == "-":
                old_left -= 1
                yield "-", path or old_path or "", new_line, text
            elif tag == "\\":
                continue
            else:
                old_left -= 1
                new_left -= 1
                new_line += 1
            continue
        if line.startswith("--- "):
            old_path = _header_path(line)
        elif line.startswith("+++ "):
            path = _header_path(line)
        elif line.startswith("diff --git "):
            old_path = path = None
        else:
            match = _HUNK.match(line)
            if match:
                old_left = int(match.group(1) or 1)
                new_line = int(match.group(2))
                new_left = int(match.group(3) or 1)


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


_GIT_HEADER = re.compile(r'^diff --git "?a/(.+?)"? "?b/(.+?)"?$')


def changed_paths(diff_text: str) -> list[str]:
    """Every path a git diff touches, old and new names, including files without line
    changes (empty, binary, mode-only) that ``stats`` does not see."""
    out: dict[str, None] = {}
    for line in diff_text.splitlines():
        match = _GIT_HEADER.match(line)
        if match:
            out[match.group(1)] = None
            out[match.group(2)] = None
    return list(out)
