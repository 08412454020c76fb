"""A long-lived worker's clone per remote: an object store only, never a working tree.

A warm worker runs many jobs, so instead of cloning the remote for each one it keeps a
bare repository per remote URL and *fetches* into it what a job needs (new objects
only). Each job still gets a fresh repository and a clean checkout of its own commit;
that repository borrows the cache's objects through ``objects/info/alternates`` and owns
nothing else of it.

The cache lives where a job's commands can reach it, so it is untrusted between jobs:
before each use everything but its objects and refs is thrown away and rebuilt (config,
hooks, info, logs), its own alternates are dropped, and a cache git refuses to work
with is wiped and fetched again from scratch. Objects are addressed by their content;
refs only steer the fetch negotiation.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterable
from pathlib import Path

from looprun.errors import LooprunError
from looprun.workspace.git import Git

_CONFIG = "[core]\n\trepositoryformatversion = 0\n\tbare = true\n\tfilemode = true\n"
_KEEP = ("objects", "refs", "packed-refs")


class CloneCache:
    """Bare repositories under ``root``, one per remote URL."""

    def __init__(self, root: Path):
        self.root = root

    def path(self, url: str) -> Path:
        return self.root / (hashlib.sha256(url.encode()).hexdigest()[:16] + ".git")

    def fetch(self, url: str, refs: dict[str, str]) -> Path:
        """Bring the objects of ``refs`` (remote name -> sha) from ``url`` into the cache
        for ``url``; returns its objects directory."""
        cache = self.path(url)
        try:
            self._sanitize(cache)
            self._fetch(cache, url, refs)
        except (LooprunError, OSError):  # a damaged or tampered cache: start it again
            _remove(cache)
            self._sanitize(cache)
            self._fetch(cache, url, refs)
        return cache / "objects"

    def _fetch(self, cache: Path, url: str, refs: dict[str, str]) -> None:
        git = Git(cache, cache)
        have = git.run("cat-file", "--batch-check", input=_lines(refs.values()).encode())
        if "missing" not in have:
            return  # everything is here already: no process talks to the remote
        specs = [f"+{name}:{name}" for name in refs]
        git.run("fetch", "-q", "--no-tags", "--no-write-fetch-head", url, *specs)

    def _sanitize(self, cache: Path) -> None:
        """Keep only objects and refs; whatever else a job planted is gone."""
        if cache.is_symlink() or (cache.exists() and not cache.is_dir()):
            cache.unlink()
        cache.mkdir(parents=True, exist_ok=True)
        for entry in cache.iterdir():
            kept = entry.name in _KEEP and not entry.is_symlink()
            if kept and entry.is_dir() == (entry.name != "packed-refs"):
                continue
            _remove(entry)
        for name in ("alternates", "http-alternates"):
            (cache / "objects" / "info" / name).unlink(missing_ok=True)
        for sub in ("objects", "refs"):
            (cache / sub).mkdir(exist_ok=True)
        (cache / "HEAD").write_text("ref: refs/heads/main\n")
        (cache / "config").write_text(_CONFIG)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def borrow(git: Git, objects: Path, refs: dict[str, str]) -> None:
    """Make the fresh repository of ``git`` use ``objects`` and hold ``refs`` (name ->
    sha), as a fetch of them would have left it."""
    info = git_dir_of(git) / "objects" / "info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "alternates").write_text(f"{objects.resolve()}\n")
    if refs:
        git.run("update-ref", "--stdin", input=_updates(refs).encode())


def git_dir_of(git: Git) -> Path:
    return git.git_dir if git.git_dir is not None else git.workdir / ".git"


def _lines(items: Iterable[str]) -> str:
    return "".join(f"{x}\n" for x in items)


def _updates(refs: dict[str, str]) -> str:
    return "".join(f"update {name} {sha}\n" for name, sha in refs.items())
