"""Whole-file writes: a reader (or a crash) sees the old content or the new, never half."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

from looprun.system.safefs import open_dir


def _fsync_dir(fd: int) -> None:
    """Make a rename durable; some file systems cannot fsync a directory, which is fine."""
    with contextlib.suppress(OSError):
        os.fsync(fd)


def _open_parent(path: Path, nofollow: bool) -> int:
    if nofollow:
        return open_dir(path.parent, create=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def write_atomic(
    path: Path, data: str | bytes, *, nofollow: bool = False, sync: str = "all"
) -> None:
    """Write via a temp file in the same directory, fsync, rename, fsync the directory.

    ``sync`` says what survives a machine crash: ``"all"`` (the content and the rename),
    ``"content"`` (no directory fsync: after a machine crash the file is whole, old or
    new; the next fsync on the file system usually carries the rename), ``"none"``
    (whole for any reader and after a process crash; the OS writes it back later).

    The temp file is created exclusively and renamed over the name, so an existing link
    at ``path`` is replaced, never written through. ``nofollow`` (the engine's own state)
    also refuses a link anywhere on the way to the directory. An existing file keeps its
    mode; a new one gets the usual umask mode. On any failure the temp file is removed
    and the old content stays.
    """
    path = Path(os.path.abspath(path))
    dfd = _open_parent(path, nofollow)
    try:
        write_atomic_at(dfd, path.name, data, sync=sync)
    finally:
        os.close(dfd)


def write_atomic_at(
    dfd: int, name: str, data: str | bytes, *, sync: str = "all", vacate: bool = False
) -> None:
    """:func:`write_atomic` of ``name`` in the directory ``dfd`` the caller holds open (no
    walk from ``/`` per write: the engine's own directories, opened once, no-follow).

    ``vacate`` (only with ``sync="none"``, for a copy whose durable original is kept
    elsewhere): the old file is removed before the new one is renamed in. Renaming over
    a file makes ext4 write the new file's data out at once (its ``auto_da_alloc``),
    which costs more than the rest of the write; a reader may then find no file for a
    moment, never a half-written one, and must read the original instead."""
    if vacate and sync != "none":
        raise ValueError("vacate is for copies written without fsync")
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        mode: int | None = stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else None
    except FileNotFoundError:
        mode = None
    if mode is None:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    tmp = f".{name}.{secrets.token_hex(4)}.looprun-tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o600, dir_fd=dfd)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            if sync != "none":
                os.fsync(fh.fileno())
        if vacate:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=dfd)
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dfd)
        raise
    if sync == "all":
        _fsync_dir(dfd)
