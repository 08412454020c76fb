"""What a validation read: every file's content digest and every path it probed.

Loading a template reads files (the template, its ``extends`` parent, ``include``
fragments, sub-loops, a case file's template) and probes paths that decide which file
a reference names (``extends: base`` is ``./base.yaml`` if that exists, else the
built-in). Recording both lets an on-disk result be reused only while none of them
changed: same bytes in every file read, same answer from every probe.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Deps:
    """Files read (absolute path -> sha256 of the bytes parsed) and paths probed
    (absolute path -> whether it existed)."""

    files: dict[str, str] = field(default_factory=dict)
    probes: dict[str, bool] = field(default_factory=dict)
    # remote files read through the lock (``git+URL@REF#PATH`` -> ``sha256:...@commit``):
    # a run records them with its own files, so a resume names the commit it ran
    remote: dict[str, str] = field(default_factory=dict)
    # the verdict also depended on something outside files (installed plugins): not kept
    volatile: bool = False


_ACTIVE: list[Deps] = []


def _key(path: Path) -> str:
    # not resolved: references are resolved relative to the path as given, links included
    return os.path.abspath(path)


def read(path: Path, digest: str) -> None:
    """Note that ``path`` was parsed with this content digest."""
    for deps in _ACTIVE:
        deps.files.setdefault(_key(path), digest)


def read_remote(name: str, digest: str, commit: str) -> None:
    """Note that the remote file ``name`` was parsed at ``commit`` with this digest."""
    for deps in _ACTIVE:
        deps.remote.setdefault(name, f"{digest}@{commit}")


def probe(path: Path, exists: bool) -> None:
    """Note that resolving a reference asked whether ``path`` exists."""
    for deps in _ACTIVE:
        deps.probes.setdefault(_key(path), exists)


def volatile() -> None:
    """Note that the outcome depends on more than files (an observer parser a plugin
    provides: installing or removing it changes the verdict)."""
    for deps in _ACTIVE:
        deps.volatile = True


@contextlib.contextmanager
def recording() -> Iterator[Deps]:
    """Record what is read and probed inside the block."""
    deps = Deps()
    _ACTIVE.append(deps)
    try:
        yield deps
    finally:
        _ACTIVE.remove(deps)
