"""Reading git's patch text as git wrote it: one reader for the policy and the observer.

git ends a patch line at ``\\n`` only; ``str.splitlines`` also splits at CR, FF, VT,
NEL and U+2028, so an added line holding one of them would leave its tail outside the
hunk, where no forbidden pattern is looked for. Paths git quotes (a tab, newline,
quote or backslash in the name) are unquoted here, so such a file is not dropped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_CHUNK = re.compile(r"^(?=diff --git )", re.M)
_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def lines(patch: str) -> list[str]:
    """The patch's lines, split where git split them (at ``\\n`` only)."""
    out = patch.split("\n")
    if out and out[-1] == "":
        out.pop()
    return out


def chunks(patch: str) -> list[str]:
    """The patch cut before each ``diff --git`` line: one part per file, in order; joined,
    they are the patch again."""
    return [c for c in _CHUNK.split(patch) if c]


def source_lines(text: str) -> list[str]:
    """An added line, then its pieces as Python (and most editors) split it: a lone CR
    ends a line there, so code after it runs as a line of its own and must be checked as
    one (a pattern anchored with ``^`` included)."""
    return [text, *text.split("\r")] if "\r" in text else [text]


def shown(text: str) -> str:
    """An added line for a message: a CR written as ``\\r``, so a terminal showing it
    does not overwrite the start of the line with what follows."""
    return text.replace("\r", "\\r")


def unquote_path(raw: str) -> str:
    """Undo git's C-style quoting of a path (``"a\\tb"``, octal bytes)."""
    if not (len(raw) >= 2 and raw[0] == '"' and raw[-1] == '"'):
        return raw
    return _unescape(raw[1:-1])


def _unescape(body: str) -> str:
    out = bytearray()
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
        out += c.encode("utf-8", "surrogateescape")
        i += 1
    return out.decode("utf-8", "surrogateescape")


def _quoted_token(text: str) -> tuple[str, str] | None:
    """A leading quoted name of ``text`` (unquoted) and the rest after it."""
    i = 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return _unescape(text[1:i]), text[i + 1 :]
        i += 1
    return None


def git_header_paths(line: str) -> tuple[str, str] | None:
    """The old and new path of a ``diff --git a/X b/Y`` line, either one quoted or not.

    An unquoted pair is split in the middle when both names are the same (always, for
    the engine's ``--no-renames`` diffs), since a name may itself hold `` b/``.
    """
    if not line.startswith("diff --git "):
        return None
    rest = line[len("diff --git ") :]
    if rest.startswith('"'):
        first = _quoted_token(rest)
        if first is None or not first[1].startswith(" "):
            return None
        old, tail = first[0], first[1][1:]
        new = unquote_path(tail)
    else:
        half = (len(rest) - 1) // 2
        if rest[half : half + 1] == " " and rest[:half][2:] == rest[half + 1 :][2:]:
            old, new = rest[:half], rest[half + 1 :]
        else:
            split = rest.find(' "b/')
            split = split if split >= 0 else rest.find(" b/")
            if split < 0:
                return None
            old, new = rest[:split], unquote_path(rest[split + 1 :])
    strip = lambda p: p[2:] if p[:2] in ("a/", "b/") else p  # noqa: E731
    return strip(old), strip(new)


def header_path(line: str) -> str | None:
    """The path of a ``--- a/X`` or ``+++ b/X`` line; None for ``/dev/null``."""
    raw = line[4:]
    if raw.endswith("\t"):  # git marks a name containing spaces with a trailing tab
        raw = raw[:-1]
    if raw == "/dev/null":
        return None
    path = unquote_path(raw)
    return path[2:] if path[:2] in ("a/", "b/") else path


def walk(patch: str) -> Iterator[tuple[str, str, int, str]]:
    """Yield ``(kind, path, new_line, text)`` for each ``+``/``-`` line of every hunk.

    Hunks are read by their header counts, so an added line that happens to start with
    ``+++`` is still an added line, not a file header.
    """
    old_path: str | None = None
    path: str | None = None
    old_left = new_left = 0
    new_line = 0
    for line in lines(patch):
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
            old_path = header_path(line)
        elif line.startswith("+++ "):
            path = header_path(line)
        elif line.startswith("diff --git "):
            old_path = path = None
        else:
            match = _HUNK.match(line)
            if match:
                old_left = int(match.group(1) or 1)
                new_line = int(match.group(2))
                new_left = int(match.group(3) or 1)
