"""Whole-file writes: a reader (or a crash) sees the old content or the new, never half."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path


def _fsync_dir(path: Path) -> None:
    """Make a rename durable; some file systems cannot fsync a directory, which is fine."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: str | bytes, *, sync: str = "all") -> None:
    """Write via a temp file in the same directory, fsync, rename, fsync the directory.

    ``sync`` says what survives a machine crash: ``"all"`` (the content and the rename),
    ``"content"`` (no directory fsync: after a machine crash the file is whole, old or
    new; the next fsync on the file system usually carries the rename), ``"none"``
    (whole for any reader and after a process crash; the OS writes it back later).
    An existing file keeps its mode; a new one gets the usual umask mode. On any failure
    the temp file is removed and the old content stays.
    """
    payload = data.encode("utf-8") if isinstance(data, str) else data
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode: int | None = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = None
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".looprun-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            if sync != "none":
                os.fsync(fh.fileno())
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if sync == "all":
        _fsync_dir(path.parent)
