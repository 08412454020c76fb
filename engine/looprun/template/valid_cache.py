"""An on-disk record of the files `looprun validate` found valid, so validating unchanged
templates again (a pre-commit hook, CI, an editor on save) skips parsing, the schema
and compiling every expression.

An entry is reused only while everything its validation depended on is unchanged: the
bytes of every file it read (the template, its parent, fragments, sub-loops, a case
file's template: see :mod:`looprun.template.deps`), the answer of every probe that
chose which file a reference names, and the engine itself (looprun's version, the
schemas' content, the modification stamps of looprun's code and of the libraries that
judge a template). Only clean results are stored: a file with problems is validated
afresh each time, so every message is exactly what a full validation prints. A
missing, unreadable or corrupt entry is a miss, never an error; entries are written
atomically, so a reader sees a whole entry or none.

An entry says "skip checking this file", so only the user may have written it: a cache
directory or entry that belongs to someone else, or that its group or others may write
to, is neither read nor written (every file is then checked in full).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import stat
import sys
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from looprun import __version__
from looprun.errors import LooprunError
from looprun.system import safefs
from looprun.system.atomic import write_atomic
from looprun.system.cache_home import cache_home
from looprun.system.resources import schemas_dir
from looprun.template import slots
from looprun.template.deps import Deps

_FORMAT = 1
_PACKAGE = Path(__file__).resolve().parents[1]
# the libraries whose verdicts a validation carries (parser, schema checker, expressions)
_JUDGES = ("yaml", "jsonschema", "jsonschema_specifications", "referencing", "jinja2", "pathspec")


def default_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$LOOPRUN_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/looprun/valid``
    (``~/.cache/looprun/valid`` by default)."""
    env = os.environ if env is None else env
    if env.get("LOOPRUN_CACHE_DIR"):
        return Path(env["LOOPRUN_CACHE_DIR"])
    return cache_home(env) / "valid"


def _stat_stamp(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return f"{path}:-"
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


@cache
def engine_stamp() -> str:
    """What else a verdict depends on: a change to any of it invalidates every entry."""
    return stamp(_PACKAGE, schemas_dir())


def stamp(package: Path, schemas: Path) -> str:
    """looprun's version, the stamps of every file of ``package``, the content of every
    schema in ``schemas``, and the stamps of the judging libraries, as one digest."""
    h = hashlib.sha256(f"{_FORMAT}\0{__version__}\0{sys.version}".encode())
    for root, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if not name.endswith((".pyc", ".pyo")):
                h.update(_stat_stamp(os.path.join(root, name)).encode())
    for schema in sorted(schemas.glob("*.json")):
        h.update(schema.name.encode() + b"\0" + schema.read_bytes())
    for name in _JUDGES:
        spec = importlib.util.find_spec(name)
        h.update(_stat_stamp(spec.origin if spec and spec.origin else name).encode())
    return h.hexdigest()


def _private(st: os.stat_result) -> bool:
    """Owned by the user and writable by nobody else."""
    return st.st_uid == os.geteuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def trusted_dir(root: Path) -> bool:
    """Whether ``root`` (its real path) is a directory of the user's that no one else may
    write to."""
    try:
        fd = safefs.open_dir(Path(os.path.realpath(root)))
    except (OSError, LooprunError):
        return False
    try:
        return _private(os.fstat(fd))
    finally:
        os.close(fd)


def read_private(path: Path) -> bytes | None:
    """The entry's bytes when the entry itself (not a link) is the user's own."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        return fh.read() if _private(os.fstat(fh.fileno())) else None


def file_digest(path: str) -> str | None:
    """The sha256 of a file's bytes (``None``: unreadable)."""
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return None


class ValidCache:
    """Entries under ``root``, one per validated file (by its absolute path)."""

    def __init__(self, root: Path):
        self.root = root

    def _entry(self, ref: str) -> tuple[Path, str]:
        where = os.path.abspath(ref)
        # the stack a load composes in picks the pack: a verdict holds for one stack
        choice = slots.current()
        stack = str(choice.name)
        name = hashlib.sha256(f"{engine_stamp()}\0{where}\0{stack}".encode()).hexdigest()[:40]
        return self.root / f"{name}.json", where

    def known_valid(self, ref: str) -> bool:
        """True when ``ref`` was found valid and nothing that verdict read has changed."""
        path, where = self._entry(ref)
        raw = read_private(path) if trusted_dir(self.root) else None
        try:
            entry = json.loads(raw) if raw is not None else None
        except (OSError, ValueError):
            return False
        files, probes = _checked(entry, where)
        if files is None or probes is None:
            return False
        return all(file_digest(f) == d for f, d in files.items()) and all(
            os.path.exists(p) == e for p, e in probes.items()
        )

    def remember_valid(self, ref: str, deps: Deps) -> None:
        """Store a clean verdict; a cache that cannot be written is only a slower next run."""
        path, where = self._entry(ref)
        if where not in deps.files or deps.volatile:
            return  # not keyed on its own file (a built-in name), or not on files alone
        entry = {
            "format": _FORMAT,
            "stamp": engine_stamp(),
            "ref": where,
            "files": deps.files,
            "probes": deps.probes,
        }
        with contextlib.suppress(OSError):
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            if not trusted_dir(self.root):
                return
            write_atomic(path, json.dumps(entry, sort_keys=True), sync="none")
            path.chmod(0o600)  # whatever the umask or an old entry's mode: only ours


def _checked(entry: Any, where: str) -> tuple[dict[str, str] | None, dict[str, bool] | None]:
    """The entry's files and probes when it is well-formed and for this engine and file."""
    if not (
        isinstance(entry, dict)
        and entry.get("format") == _FORMAT
        and entry.get("stamp") == engine_stamp()
        and entry.get("ref") == where
    ):
        return None, None
    files, probes = entry.get("files"), entry.get("probes")
    if not (
        isinstance(files, dict)
        and where in files
        and all(isinstance(k, str) and isinstance(v, str) for k, v in files.items())
        and isinstance(probes, dict)
        and all(isinstance(k, str) and isinstance(v, bool) for k, v in probes.items())
    ):
        return None, None
    return files, probes
