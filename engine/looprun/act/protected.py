"""Where no tool may go, and the path arithmetic every check shares.

``.git`` (at any depth, since hooks live there) and the engine's own ``.looprun`` are
off limits under every spelling some file system takes for them: another case, NFC or
NFD, ignorable code points, trailing dots or spaces, NTFS's short name.
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path, PurePosixPath

PROTECTED_DIRS: dict[str, str] = {".git": "path.git", ".looprun": "path.looprun"}


def inside(path: Path, root: Path) -> bool:
    """Whether ``path`` is ``root`` or below it (lexically: resolve both first)."""
    return path == root or root in path.parents


def relative(path: Path, workdir: Path) -> str:
    """Workdir-relative POSIX form of an absolute path inside the workdir."""
    rel = os.path.relpath(path, workdir)
    return "." if rel == "." else PurePosixPath(Path(rel)).as_posix()


# Characters some file systems ignore in names (HFS+ ignores these code points; NTFS
# ignores trailing dots and spaces), so ``.g\u200cit`` or ``.git.`` can be ``.git`` there.
_IGNORABLE = dict.fromkeys(
    map(ord, "\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
        "\u206a\u206b\u206c\u206d\u206e\u206f\ufeff")
)  # fmt: skip
_SHORT_NAMES = {"git~1": "path.git"}  # the 8.3 short name NTFS gives ``.git``


def protected_rule(part: str) -> str | None:
    """The rule a path component breaks by naming ``.git`` or ``.looprun`` on some file
    system (case, NFC/NFD, ignorable code points, trailing dots/spaces), or None."""
    name = unicodedata.normalize("NFC", part).translate(_IGNORABLE).casefold()
    name = name.rstrip(". ")
    return PROTECTED_DIRS.get(name) or _SHORT_NAMES.get(name)


def is_protected(part: str) -> bool:
    return protected_rule(part) is not None
