"""The ``--workdir`` a command names, checked: kept apart so that commands which only
read runs (``looprun runs``) need none of what starting a run loads."""

from __future__ import annotations

from pathlib import Path

from looprun.errors import UsageError


def workdir_of(path: str) -> Path:
    wd = Path(path).expanduser().resolve()
    if not wd.is_dir():
        raise UsageError(f"--workdir {path}: not a directory")
    return wd
