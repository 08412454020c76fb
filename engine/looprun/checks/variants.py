"""The run's private store of held-out variants: tests a model wrote during the run, kept
where neither the acting model's tools nor any sandboxed command can read them.

The store is outside the working tree (the file tools never leave it) and outside the
check trees (which commands may write), under the user's cache directory, and every
run's store is hidden from every command by the sandbox (bubblewrap mounts an empty
directory over the whole ``heldout/`` directory, so a sub-loop cannot read its
sibling's either). What the triage kept (test ids, which may name the inputs) is stored
beside the tests, never in the run's state or journal, which commands can read.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from looprun.data.value import valueclass
from looprun.system.cache_home import engine_cache

_KEPT = "kept.json"
_PLACE = "place.json"
_TESTS = "tests"


def heldout_root(env: Mapping[str, str] | None = None) -> Path:
    """Where every run keeps its variants: ``$LOOPRUN_CACHE_DIR/heldout`` if set, else
    ``$XDG_CACHE_HOME/looprun/heldout`` (beside the check trees, not inside them)."""
    return engine_cache(env) / "heldout"


@valueclass
class VariantStore:
    """One run's variants, an observer each: ``ROOT/RUN/OBSERVER/tests/FILE``."""

    root: Path  # the run's directory, under ``heldout_root()``

    def open(self) -> None:
        """Create the store, private to the user (0700 on every level it makes)."""
        self.root.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.root.mkdir(mode=0o700, exist_ok=True)

    def source(self, observer: str) -> Path:
        """The directory an observer's held-out copy is made from."""
        return self.root / observer / _TESTS

    def store(self, observer: str, file: str, text: str, dest: str = "") -> None:
        """Replace the observer's variants with ``text`` as ``file``, copied to ``dest``
        (workdir-relative; '' for the observer's own ``to``) when they run; nothing kept yet."""
        here = self.root / observer
        self.open()
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(here)
        here.mkdir(mode=0o700)
        (here / _TESTS).mkdir(mode=0o700)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(here / _TESTS / file, flags, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        fd = os.open(here / _PLACE, flags, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump({"file": file, "dest": dest}, out)

    def placed(self, observer: str) -> tuple[str, str]:
        """The stored variants' file name and where they are copied ('' for ``to``);
        ('', '') when nothing is stored."""
        try:
            fd = os.open(self.root / observer / _PLACE, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return "", ""
        with os.fdopen(fd, encoding="utf-8") as data:
            try:
                place = json.load(data)
            except ValueError:
                return "", ""
        if not isinstance(place, dict):
            return "", ""
        file, dest = place.get("file"), place.get("dest")
        return (file, dest) if isinstance(file, str) and isinstance(dest, str) else ("", "")

    def text(self, observer: str) -> str:
        """The stored variants' code ('' when nothing is stored)."""
        file, _ = self.placed(observer)
        if not file:
            return ""
        try:
            fd = os.open(self.source(observer) / file, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return ""
        with os.fdopen(fd, encoding="utf-8", errors="replace") as data:
            return data.read()

    def keep(self, observer: str, ids: Sequence[str]) -> None:
        """The ids the triage kept: the only ones the check runs from now on."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(self.root / observer / _KEPT, flags, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(list(ids), out)

    def kept(self, observer: str) -> tuple[str, ...]:
        """What the triage kept (none before it ran, or when the store is gone)."""
        try:
            fd = os.open(self.root / observer / _KEPT, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return ()
        with os.fdopen(fd, encoding="utf-8") as data:
            try:
                ids = json.load(data)
            except ValueError:
                return ()
        return tuple(i for i in ids if isinstance(i, str)) if isinstance(ids, list) else ()
