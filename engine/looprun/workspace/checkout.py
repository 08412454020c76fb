"""Writing a tree into the working tree: the files that differ are put back or removed,
through a temporary index, so the user's index, HEAD and stash are never touched."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from looprun.workspace.diffs import GITLINK
from looprun.workspace.git import Git


@contextlib.contextmanager
def temp_index() -> Iterator[dict[str, str]]:
    """The environment of git calls on a fresh index file of their own."""
    with tempfile.TemporaryDirectory(prefix="looprun-index-") as tmp:
        yield {"GIT_INDEX_FILE": os.path.join(tmp, "index")}


def apply(
    git: Git, workdir: Path, changes: Iterable[tuple[str, str, str, str]], target: str
) -> list[str]:
    """Make the paths of ``changes`` (raw diff rows from the working tree's snapshot to
    tree ``target``) as ``target`` has them; returns the paths written or removed.
    Submodules are their own repositories and are left be."""
    removed: list[str] = []
    written: list[str] = []
    for src_mode, dst_mode, status, path in changes:
        if GITLINK in (src_mode, dst_mode):
            continue
        if status == "D" or status == "T":
            removed.append(path)
        if status != "D":
            written.append(path)
    for path in removed:
        full = workdir / path
        if full.is_symlink() or full.is_file():
            full.unlink()
            prune_empty_dirs(full.parent, workdir)
    if written:
        with temp_index() as env:
            git.run("read-tree", target, env=env)
            data = b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in written)
            git.run("checkout-index", "-f", "-z", "--stdin", env=env, input=data)
    return sorted(set(removed) | set(written))


def remove_ignored(workdir: Path, paths: Iterable[str], state_rel: str) -> None:
    """Remove ignored ``paths`` (a directory as ``dir/``), never the state directory nor
    a directory holding it; directories emptied by the removal go too."""
    state = state_rel.strip("/") + "/"
    for rel in sorted(paths):
        if (rel.rstrip("/") + "/").startswith(state) or state.startswith(rel):
            continue
        full = workdir / rel.rstrip("/")
        if full.is_dir() and not full.is_symlink():
            shutil.rmtree(full, ignore_errors=True)
        elif full.is_symlink() or full.exists():
            full.unlink()
        prune_empty_dirs(full.parent, workdir)


def prune_empty_dirs(directory: Path, root: Path) -> None:
    """Remove ``directory`` and its parents up to ``root`` while they are empty."""
    while directory != root and root in directory.parents:
        try:
            directory.rmdir()
        except OSError:
            return
        directory = directory.parent
