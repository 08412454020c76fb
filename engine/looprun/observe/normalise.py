"""Normalisation of failure text, so equal failures give equal signatures.

Two runs of the same failing check differ in noise: durations, memory addresses,
temporary paths, timestamps, line numbers that moved by an edit. Masking that noise
here (and only here) lets the observe parsers and the loop's no-progress detector
agree on when "the same failure" happened again.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

# Order matters: timestamps before durations and line numbers, paths before line numbers.
_MASKS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?"
            r"(?:\s?(?:Z|UTC|[+-]\d{2}:?\d{2}))?"
        ),
        "<ts>",
    ),
    (re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b"), "<time>"),
    # Unix time in seconds with a fraction (``time.time()``, 2017-2033): a timestamp, not a
    # value under test; whole seconds are left alone, as a plain 10-digit number may be one.
    (re.compile(r"(?<![\d.])1[5-9]\d{8}\.\d{1,9}(?![\d.])"), "<ts>"),
    (
        re.compile(
            r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
        ),
        "<uuid>",
    ),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "0x<addr>"),
    # pytest's shortened reprs cut the middle out, address included: `<generator o...7f5d9a80>`
    # (the cut may fall inside the `0x`: `<generator ob...x7f50d5e43780>`)
    (re.compile(r"\.\.\.(?:0?x)?[0-9a-fA-F]{1,16}>"), "...<addr>>"),
    # a bare hexadecimal id (no 0x) of 8-16 digits with letters and digits both, as
    # reprs and object ids print it; all-decimal numbers are values, left alone
    (
        re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{8,16}\b"),
        "<addr>",
    ),
    (
        re.compile(
            r"(?:[A-Za-z]:\\(?:Users\\[^\\\s]+\\AppData\\Local\\)?Temp\\[^\s'\"]*)"
            r"|(?:(?:/private)?/(?:tmp|var/tmp|var/folders|dev/shm)/[^\s'\":)]*)"
        ),
        "<tmp>",
    ),
    (
        re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s?(?:ms|us|µs|ns|s|sec|secs|seconds?|min|minutes?)\b"),
        "<dur>",
    ),
    (re.compile(r"(\.[A-Za-z]{1,6}\"?(?:, line |:|\())\d+(?:[:,]\d+)?"), r"\1<n>"),
    (re.compile(r"\bline \d+\b"), "line <n>"),
    (re.compile(r"\bpid[= ]\d+\b"), "pid=<n>"),
    (re.compile(r"\b\d{12,}\b"), "<num>"),  # id() addresses in decimal, ns timestamps
    (re.compile(r"\bgw\d+\b"), "gw<n>"),  # pytest-xdist worker ids
    (re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]"), ""),  # colours
    (re.compile(r"[ \t]+"), " "),
)


def normalise(text: str) -> str:
    """``text`` with run-to-run noise masked and whitespace runs collapsed."""
    for pattern, replacement in _MASKS:
        text = pattern.sub(replacement, text)
    return text.strip()


def digest(parts: Iterable[str]) -> str:
    """A short, stable hex digest of already normalised parts (order matters)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8", "replace"))
        h.update(b"\x00")
    return h.hexdigest()[:16]


def failure_signature(failures: Iterable[tuple[str, str]], error: str | None = None) -> str:
    """Digest of (id, message) pairs: sorted, normalised, independent of report order."""
    parts = sorted({f"{normalise(i)}\x1f{normalise(m)}" for i, m in failures})
    if error:
        parts.append("error\x1f" + normalise(error))
    return digest(parts)
