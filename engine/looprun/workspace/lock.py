"""One run at a time per working tree, and the git lock files a killed run leaves."""

from __future__ import annotations

import fcntl
import glob
import os
import time
from pathlib import Path
from typing import Any

from looprun.errors import LooprunError
from looprun.system import safefs
from looprun.workspace.checkpoints import REF_PREFIX
from looprun.workspace.git import Git

LOCK_GRACE_S = 1.0


class RunLock:
    """One run at a time per working tree: two runs would roll back each other's edits
    and race on the private index. An advisory ``flock`` on ``<state_dir>/lock``, so a
    killed run (even ``kill -9``) never leaves a stale lock behind."""

    def __init__(self, state_dir: Path, run_id: str):
        self.path = Path(state_dir) / "lock"
        self.run_id = run_id
        self._fh: Any = None

    def __enter__(self) -> RunLock:
        safefs.checked_dir(self.path.parent)
        fd = safefs.open_file(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        fh = open(fd, "r+", encoding="utf-8")
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            holder = fh.read().strip() or "another run"
            fh.close()
            raise LooprunError(
                f"{holder} is still running in {self.path.parent.parent}; one run at a "
                "time per working tree - wait for it, or run in a separate clone or "
                "`git worktree` (--workdir)"
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"run {self.run_id} (pid {os.getpid()})\n")
        fh.flush()
        self._fh = fh
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fh is not None:
            self._fh.close()  # closing releases the flock
            self._fh = None


def clear_stale_locks(
    git: Git, state_dir: Path, run_id: str, *, grace_s: float = LOCK_GRACE_S
) -> list[Path]:
    """Remove the lock files a killed run left behind (see ``Workspace.clear_stale_locks``:
    only while holding the :class:`RunLock`, and only the engine's own locks)."""
    found = [state_dir / "snapshot.index.lock"]
    own, common = (Path(os.path.realpath(p)) for p in git.git_dirs())
    if own != common and own.parent.name == "worktrees":  # a sub-loop's worktree
        found.append(own / "index.lock")
    rid = glob.escape(run_id)
    found.extend((common / REF_PREFIX / "base").glob("*.lock"))  # same name, same value
    for ns in (REF_PREFIX, "refs/heads/looprun/"):
        for pattern in (f"{rid}/**/*.lock", f"{rid}.*/**/*.lock"):
            found.extend((common / ns).glob(pattern))
    return [p for p in dict.fromkeys(found) if _remove_stale(p, grace_s)]


def _remove_stale(lock: Path, grace_s: float) -> bool:
    """Remove ``lock`` once it is ``grace_s`` old; False if it was not there."""
    try:
        age = time.time() - lock.stat().st_mtime
    except FileNotFoundError:
        return False
    if age < grace_s:
        time.sleep(grace_s - age)
    try:
        lock.unlink()
    except FileNotFoundError:
        return False
    return True
