"""A finding's identity that survives edits elsewhere in its file: rule, file, source line.

A lint finding is "the same one" before and after a change when its rule, its file and the
text of the line it points at (white space folded) are the same, wherever the line moved:
an edit above it shifts its line number, not its key. Keys are digests, so the source text
never lands in the run's records; the same finding twice in a file gives the same key
twice, and comparisons count them (a third copy of a line is new).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath

from looprun.errors import LooprunError
from looprun.observe.base import Item
from looprun.system.safefs import open_file

_MAX_SOURCE = 4 * 1024 * 1024  # a source file larger than this is keyed by the message
_Lines = dict[str, list[str] | None]


def _source_lines(workdir: Path, file: str, cache: _Lines) -> list[str] | None:
    """The lines of ``file`` under ``workdir``, or None when it is not a regular file
    inside it (a link, a FIFO, a path with ``..``) or is too large to read."""
    if file in cache:
        return cache[file]
    lines: list[str] | None = None
    rel = PurePosixPath(file)
    if not rel.is_absolute() and ".." not in rel.parts:
        try:
            fd = open_file(workdir / rel, os.O_RDONLY | os.O_NONBLOCK)
        except (OSError, LooprunError):  # missing, a link on the way, not readable
            fd = -1
        if fd >= 0:
            with os.fdopen(fd, "rb") as fh:
                st = os.fstat(fh.fileno())
                if stat.S_ISREG(st.st_mode) and st.st_size <= _MAX_SOURCE:
                    lines = fh.read().decode("utf-8", "replace").splitlines()
    cache[file] = lines
    return lines


def finding_key(item: Item, workdir: Path, cache: _Lines | None = None) -> str:
    """``item``'s key: a digest of its rule, its file and its line's text (the message
    when the line cannot be read)."""
    cache = {} if cache is None else cache
    text = item.message
    if item.file and item.line:
        lines = _source_lines(workdir, item.file, cache)
        if lines is not None and 0 < item.line <= len(lines):
            text = lines[item.line - 1]
    raw = "\x1f".join((item.rule or item.id, item.file or "", " ".join(text.split())))
    return hashlib.sha256(raw.encode("utf-8", "replace")).hexdigest()[:16]


def finding_keys(items: Iterable[Item], workdir: Path) -> list[str]:
    """The key of each item, in order (files read once each)."""
    cache: _Lines = {}
    return [finding_key(i, workdir, cache) for i in items]


def new_flags(keys: Sequence[str], known: Iterable[str]) -> list[bool]:
    """For each key, whether it is new: not among ``known``, each known key matching one
    occurrence (a finding that was there twice and is there three times is new once)."""
    left = Counter(known)
    flags = []
    for key in keys:
        flags.append(left[key] <= 0)
        left[key] -= 1
    return flags
