"""Opening the engine's own files without ever following a symbolic link.

The state directory lives in a tree the repository (and code the model runs) can shape:
a ``.looprun`` shipped as a link, or a ``lock`` or ``runs`` inside it pointing elsewhere,
would make a plain ``open`` write outside the workdir. Every directory on the way to a
state file is opened from ``/`` one component at a time with ``O_NOFOLLOW`` (openat
style, so nothing can be swapped in between), and the file itself is opened relative to
its directory's descriptor, again with ``O_NOFOLLOW``. The paths given here are built by
the engine under a resolved workdir, so a link anywhere on them is hostile, not a
convenience to honour.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

from looprun.errors import LooprunError

STATE_DIR_NAME = ".looprun"
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePathError(LooprunError):
    """A state path is a link, not a directory where one is needed, or not the user's."""


def _refusal(path: Path, problem: str) -> UnsafePathError:
    return UnsafePathError(
        f"{path}: {problem}; looprun never opens its own state through a link or in a "
        "directory it does not own - remove it (it may have come with the repository)"
    )


def _explain(path: Path, exc: OSError) -> UnsafePathError:
    """The refusal for a failed no-follow open (other failures are raised as they are)."""
    if exc.errno not in (errno.ELOOP, errno.EMLINK, errno.ENOTDIR):
        raise exc
    for where in (path, *path.parents):
        if os.path.islink(where):
            return _refusal(where, "is a symbolic link")
    return _refusal(path, "is not a directory")


def _check_owner(fd: int, path: Path) -> None:
    st = os.fstat(fd)
    if st.st_uid != os.geteuid():
        raise _refusal(path, f"belongs to uid {st.st_uid}, not to you (uid {os.geteuid()})")


def open_dir(path: Path, *, create: bool = False, mode: int = 0o700) -> int:
    """A descriptor of directory ``path`` (absolute), reached without following any link;
    ``create`` makes missing components. The caller closes it."""
    path = Path(os.path.abspath(path))
    fd = os.open("/", DIR_FLAGS)
    walked = Path("/")
    try:
        for part in path.parts[1:]:
            walked = walked / part
            try:
                nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, mode, dir_fd=fd)
                try:
                    nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    raise _explain(walked, exc) from None
            except OSError as exc:
                raise _explain(walked, exc) from None
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def opened_dir(path: Path, *, create: bool = False) -> Iterator[int]:
    fd = open_dir(path, create=create)
    try:
        yield fd
    finally:
        os.close(fd)


def open_dir_at(parent: int, name: str, path: Path) -> int:
    """Directory ``name`` in ``parent`` (``path``, for the refusal), opened no-follow."""
    try:
        return os.open(name, DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        raise _explain(path, exc) from None


@contextlib.contextmanager
def opened_dir_at(parent: int, name: str) -> Iterator[int]:
    """Directory ``name`` in ``parent`` (made 0700 when missing), opened no-follow."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o700, dir_fd=parent)
    fd = os.open(name, DIR_FLAGS, dir_fd=parent)
    try:
        yield fd
    finally:
        os.close(fd)


def open_file(path: Path, flags: int, mode: int = 0o600, *, create_dirs: bool = False) -> int:
    """``os.open`` of ``path`` with no link followed on the way or at the end."""
    path = Path(os.path.abspath(path))
    with opened_dir(path.parent, create=create_dirs) as dfd:
        try:
            return os.open(path.name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd)
        except OSError as exc:
            raise _explain(path, exc) from None


def read_bytes(path: Path) -> bytes | None:
    """The content of ``path``, or None when it does not exist."""
    try:
        fd = open_file(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def is_real_dir(path: Path) -> bool:
    """True for a directory that is not a link (a link or anything else: False)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def checked_dir(path: Path) -> Path:
    """``path`` (its parent resolved), created private (0700) when missing, after
    checking that it is a real directory owned by the user: a link, a file or someone
    else's directory there is refused before anything is written into it."""
    path = Path(os.path.realpath(path.parent)) / path.name
    fd = open_dir(path, create=True)
    try:
        _check_owner(fd, path)
    finally:
        os.close(fd)
    return path


def state_dir(workdir: Path) -> Path:
    """The checked state directory of ``workdir`` (``<workdir>/.looprun``)."""
    return checked_dir(Path(workdir) / STATE_DIR_NAME)


def remove_entry(dir_fd: int, name: str, *, trees: bool = True, strict: bool = False) -> None:
    """Remove ``name`` from the directory ``dir_fd``, whatever it is, following no link: a
    link goes, not its target; a directory goes with all it holds (``trees``) or stays.
    ``strict``: a directory that cannot be removed whole raises instead of staying in part."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dir_fd)
    elif trees:
        shutil.rmtree(name, dir_fd=dir_fd, ignore_errors=not strict)


def remove_special(path: Path) -> None:
    """Remove what directory ``path`` holds that is neither a regular file nor a
    directory (links, FIFOs, sockets, devices), so that no command writes through one."""
    with opened_dir(path) as fd:
        for name in os.listdir(fd):
            with contextlib.suppress(FileNotFoundError):
                mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
                if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                    os.unlink(name, dir_fd=fd)


def renew_dir(path: Path) -> None:
    """Replace directory ``path`` with a new, empty one (0700), through its parent's
    descriptor: the old one (or a link planted in its place) is renamed aside and removed,
    so nothing in it, and no process holding it open, reaches the new one."""
    path = Path(os.path.abspath(path))
    with opened_dir(path.parent) as parent:
        renew_entry(parent, path.name)


def renew_entry(parent: int, name: str) -> None:
    """:func:`renew_dir` of ``name`` in the directory ``parent`` the caller holds."""
    aside = f".{name}.old-{secrets.token_hex(6)}"
    try:
        os.rename(name, aside, src_dir_fd=parent, dst_dir_fd=parent)
    except FileNotFoundError:
        aside = ""
    os.mkdir(name, 0o700, dir_fd=parent)
    if aside:
        remove_entry(parent, aside)
