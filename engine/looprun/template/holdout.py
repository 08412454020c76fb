"""What the language says about a held-out check (``observe.NAME.holdout``): where its
tests may be copied, and which of its facts survive the sealing.

Checked when a template is validated; copying the tests in and sealing what the check
found happen at run time, in ``checks.holdout``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

_OFF_LIMITS = frozenset({".git", ".looprun"})
_GLOB = frozenset("*?[]!\\")


def dest_problem(dest: str) -> str:
    """Why ``dest`` cannot be where held-out tests are copied ('' when it can)."""
    text = dest.strip("/")
    if not text or dest.startswith("/"):
        return "must be a relative path inside the working directory"
    parts = PurePosixPath(text).parts
    if any(p in ("..", ".") for p in parts) or "\\" in text:
        return f"{dest!r} must be a plain relative path (no '.', '..' or backslash)"
    if any(p in _OFF_LIMITS for p in parts):
        return f"{dest!r} is inside .git or .looprun"
    if any(c in _GLOB for c in text):
        return f"{dest!r} must name one path, not a glob"
    return ""


def scalar_facts(empty: Mapping[str, Any]) -> frozenset[str]:
    """The facts of a parser that a sealed observation keeps."""
    return frozenset(k for k, v in empty.items() if isinstance(v, (bool, int, float)))
