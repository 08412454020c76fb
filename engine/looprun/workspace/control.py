"""The repository's control files, held as they were before the commands a run starts.

Where ``.git`` is not read-only to commands (the Landlock backend, ``--sandbox off``), a
test or a command the model runs can write the files that change what git does: the
config (``core.worktree``, ``core.hooksPath``, ``core.fsmonitor``, an ``[include]``),
hooks, ``info/`` (exclude, attributes, grafts, sparse-checkout), alternates, ``shallow``,
a linked worktree's ``commondir`` and ``gitdir``, and replace refs. The engine's git
would act on them next: another work tree, hidden files, a history or a diff that lies,
a program run by git. :class:`ControlFiles` keeps a copy taken when the run opened the
repository; after each command the files are compared with it (one ``lstat`` each when
nothing changed: a command cannot set a file's ctime back) and anything that differs is
put back exactly (content, presence, mode) before the engine runs git again, and named so
the run reports it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import threading
from collections.abc import Iterable
from pathlib import Path

from looprun.data.value import valueclass
from looprun.system import safefs

# in the repository's own git directory (a linked worktree's differs from the common one)
_OWN_FILES = ("config.worktree", "commondir", "gitdir")
# in the common git directory: single files, then whole trees
_COMMON_FILES = ("config", "shallow", "objects/info/alternates", "packed-refs")
_COMMON_TREES = ("info", "hooks", "refs/replace")
_PACKED = "packed-refs"
_REPLACE = b"refs/replace/"

# what lstat says of an entry; a change of any part means the entry must be read again
Stamp = tuple[int, int, int, int, int]


@valueclass
class Entry:
    """What one path held: a file (content), a link (target) or a directory, and its mode.
    For ``packed-refs`` only the replace refs count: git rewrites that file for other refs."""

    kind: str  # "file", "link", "dir" or "other"
    mode: int
    data: bytes = b""
    packed: bool = False  # packed-refs: ``data`` holds its replace refs only


class ControlFiles:
    """The control files of one repository, as taken; :meth:`verify` puts them back."""

    def __init__(self, git_dir: Path, common_dir: Path, *, shown_from: Path | None = None):
        own, common = os.path.realpath(git_dir), os.path.realpath(common_dir)
        files = [f"{own}/{n}" for n in _OWN_FILES] + [f"{common}/{n}" for n in _COMMON_FILES]
        self._files = tuple(dict.fromkeys(files))
        self._trees = tuple(f"{common}/{n}" for n in _COMMON_TREES)
        self._shown_from = shown_from
        self._lock = threading.Lock()
        self._entries: dict[str, Entry] = {}
        self._stamps: dict[str, Stamp] = {}
        self.take()

    def take(self) -> None:
        """Hold the files as they are now (at the start, and after the engine's own
        changes to them)."""
        with self._lock:
            self._stamps = self._scan()
            self._entries = {p: e for p in self._stamps if (e := _read(p)) is not None}

    def verify(self) -> list[str]:
        """Put back every control file that changed since :meth:`take` and name each one
        (relative to ``shown_from`` when inside it); [] when nothing changed."""
        with self._lock:
            now = self._scan()
            if now == self._stamps:
                return []
            # everything is read before anything is put back: removing a new directory
            # takes the files in it, which must still be named
            differ: list[tuple[str, Entry | None, Entry | None]] = []
            for path in sorted(set(now) | set(self._stamps), key=lambda p: p.count("/")):
                if now.get(path) != self._stamps.get(path):
                    was, found = self._entries.get(path), _read(path) if path in now else None
                    if not _same(was, found):
                        differ.append((path, was, found))
            changed: list[str] = []
            for path, was, found in differ:
                _put_back(Path(path), was)
                if {e.kind for e in (was, found) if e is not None} != {"dir"}:
                    changed.append(path)  # a directory is named by the files in it
            self._stamps = self._scan()
            return [self._shown(p) for p in changed]

    def _scan(self) -> dict[str, Stamp]:
        """The stamp of every watched path that exists, the trees walked without following
        a link (strings, not ``Path``: this runs after every command)."""
        found: dict[str, Stamp] = {}
        for path in self._files:
            _stamp_into(found, path)
        for top in self._trees:
            _walk(found, top)
        return found

    def _shown(self, path: str) -> str:
        if self._shown_from is not None:
            with contextlib.suppress(ValueError):
                return str(Path(path).relative_to(self._shown_from))
        return path


def _stamp_into(found: dict[str, Stamp], path: str) -> os.stat_result | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    found[path] = (st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    return st


def _walk(found: dict[str, Stamp], top: str) -> None:
    """Stamp ``top`` and all under it (a loop, not recursion: a command may nest deep)."""
    pending = [top]
    while pending:
        path = pending.pop()
        st = _stamp_into(found, path)
        if st is not None and stat.S_ISDIR(st.st_mode):
            with contextlib.suppress(OSError):
                pending += [f"{path}/{name}" for name in os.listdir(path)]


def _read(path: str) -> Entry | None:
    """What ``path`` holds now, read without following a link or waiting on a FIFO;
    None when it is absent."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        return Entry("link", mode, os.fsencode(os.readlink(path)))
    if stat.S_ISDIR(st.st_mode):
        return Entry("dir", mode)
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError:
        return Entry("other", mode)  # swapped for a link since the lstat
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return Entry("other", stat.S_IMODE(st.st_mode))
        data = fh.read()
    if os.path.basename(path) == _PACKED:
        return Entry("file", mode, b"".join(_replace_records(data)), packed=True)
    return Entry("file", mode, data)


def _same(was: Entry | None, found: Entry | None) -> bool:
    if _packed(was) or _packed(found):  # absent is as good as no replace ref
        return (was.data if was else b"") == (found.data if found else b"")
    if was is None or found is None:
        return was is found
    if was.kind == "dir" and found.kind == "dir":
        return was.mode == found.mode
    return was == found


def _packed(entry: Entry | None) -> bool:
    return entry is not None and entry.kind == "file" and entry.packed


def _put_back(path: Path, was: Entry | None) -> None:
    """Make ``path`` hold ``was`` again (absent for None), through its parent's descriptor."""
    try:
        parent = safefs.open_dir(path.parent)
    except (OSError, safefs.UnsafePathError):
        return  # its directory is gone, or was replaced: that directory is put back first
    try:
        name = path.name
        if was is None:
            if name == _PACKED:
                _write(parent, name, _with_replaces(_current(parent, name), []), None)
            else:
                _remove(parent, name)
        elif was.kind == "dir":
            found = _lstat_at(parent, name)
            if found is None or not stat.S_ISDIR(found.st_mode):
                _remove(parent, name)
                os.mkdir(name, was.mode, dir_fd=parent)
            os.chmod(name, was.mode, dir_fd=parent, follow_symlinks=False)
        elif was.kind == "link":
            _remove(parent, name)
            os.symlink(os.fsdecode(was.data), name, dir_fd=parent)
        elif was.kind == "file":
            data = was.data
            if was.packed:
                data = _with_replaces(_current(parent, name), _records(was.data))
            _write(parent, name, data, was.mode)
    finally:
        os.close(parent)


def _remove(parent: int, name: str) -> None:
    """Remove ``name`` from ``parent`` whatever it is, following no link, however deep a
    tree it is: each directory found is first moved up beside it (one descriptor and
    no recursion at a time), then emptied and removed."""
    pending = [name]
    while pending:
        current = pending.pop()
        found = _lstat_at(parent, current)
        if found is None:
            continue
        if not stat.S_ISDIR(found.st_mode):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(current, dir_fd=parent)
            continue
        try:
            fd = os.open(current, safefs.DIR_FLAGS, dir_fd=parent)
        except OSError:
            continue
        try:
            for entry in os.listdir(fd):
                with contextlib.suppress(OSError):
                    if stat.S_ISDIR(os.stat(entry, dir_fd=fd, follow_symlinks=False).st_mode):
                        aside = f".{name}.{secrets.token_hex(6)}.looprun-gone"
                        os.rename(entry, aside, src_dir_fd=fd, dst_dir_fd=parent)
                        pending.append(aside)
                    else:
                        os.unlink(entry, dir_fd=fd)
        finally:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.rmdir(current, dir_fd=parent)


def _lstat_at(parent: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _current(parent: int, name: str) -> bytes:
    found = _lstat_at(parent, name)
    if found is None or not stat.S_ISREG(found.st_mode):
        return b""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def _write(parent: int, name: str, data: bytes, mode: int | None) -> None:
    """Replace ``name`` with a new file holding ``data`` (``mode``, or the old file's)."""
    found = _lstat_at(parent, name)
    if mode is None:
        mode = stat.S_IMODE(found.st_mode) if found is not None else 0o644
    if found is not None and stat.S_ISDIR(found.st_mode):
        _remove(parent, name)
    tmp = f".{name}.{secrets.token_hex(4)}.looprun-tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            os.fchmod(fh.fileno(), mode)
        os.replace(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=parent)
        raise


# -- packed-refs: one record is a ref line and the peeled (^) lines after it ---------------


def _records(data: bytes) -> list[bytes]:
    """``packed-refs`` split into records (the header comment is one of its own)."""
    records: list[bytes] = []
    for line in data.splitlines(keepends=True):
        if line.startswith(b"^") and records:
            records[-1] += line
        else:
            records.append(line if line.endswith(b"\n") else line + b"\n")
    return records


def _refname(record: bytes) -> bytes:
    first = record.split(b"\n", 1)[0]
    return first.split(b" ", 1)[1] if b" " in first and not first.startswith(b"#") else b""


def _replace_records(data: bytes) -> Iterable[bytes]:
    return [r for r in _records(data) if _refname(r).startswith(_REPLACE)]


def _with_replaces(current: bytes, replaces: list[bytes]) -> bytes:
    """``current`` with its replace refs swapped for ``replaces``, sorted by ref name as
    the ``sorted`` trait of the header promises."""
    records = _records(current)
    header = [r for r in records if r.startswith(b"#")]
    refs = [r for r in records if not r.startswith(b"#") and not _refname(r).startswith(_REPLACE)]
    return b"".join(header + sorted(refs + replaces, key=_refname))
