"""The working tree's snapshot now: a tree object of its tracked and untracked files, judged
by the ignore rules of the base, taken once and reused while nothing wrote to the tree.

A watched tree is told what was written (``touched``): after the engine's own file tools
wrote known paths, the next snapshot hashes only those, in-process (``snapshots.py``);
after a command ran, git looks at everything again, through a persistent private index
whose stat cache spares re-hashing unchanged files.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from looprun.system.crashpoint import crash_point
from looprun.workspace.git import Git, SnapshotFacts
from looprun.workspace.ignore import base_ignore_rules, current_ignore_rules
from looprun.workspace.snapshots import QuickSnapshots


def state_rel(workdir: Path, state_dir: Path) -> str:
    """The state directory relative to the working tree (``..``-led when outside it)."""
    try:
        return Path(os.path.relpath(state_dir, workdir)).as_posix()
    except ValueError:
        return ".looprun"


class CurrentTree:
    """Snapshots of one working tree, and what they leave out."""

    def __init__(self, git: Git, workdir: Path, state_dir: Path, *, watched: bool):
        self.git = git
        self.workdir = workdir
        self.state_dir = state_dir
        self.state_rel = state_rel(workdir, state_dir)
        # Watched: whoever writes to the tree calls ``touched``, so a snapshot is taken
        # once and reused until then (diff, changed files and checkpoint of one iteration
        # share it; an iteration that wrote nothing costs no git call at all).
        self.watched = watched
        self.base: str | None = None  # the base tree, whose ignore rules judge
        self.quick = QuickSnapshots(git)
        self.facts = SnapshotFacts()
        self.excluded: tuple[str, ...] = ()
        self._settled: set[str] = set()  # paths given to ``exclude`` with a lasting answer
        self._tree: str | None = None
        # The last snapshot and the paths the engine's file tools wrote since (None: a
        # command ran, anything may have changed): those alone are hashed in-process.
        self._prev: str | None = None
        self._pending: set[str] | None = None
        self._start_rules: str | None = None

    def rules(self) -> str:
        """The ignore rules snapshots go by (see ``ignore.base_ignore_rules``)."""
        if self.base is None:  # the start state: the tree's own ignore files, as they are
            if self._start_rules is None:  # read once until something may have written
                self._start_rules = current_ignore_rules(self.git, self.state_rel)
            return self._start_rules
        return base_ignore_rules(self.git, self.base)

    def head(self) -> str | None:
        if not self.watched:
            self.facts.forget()
        return self.facts.head(self.git)

    def snapshot(self) -> str:
        """The tree of the working tree now (see ``Workspace.snapshot``)."""
        if self._tree is not None and self.watched:
            return self._tree
        if self.watched and self._prev is not None and self._pending is not None and self.base:
            tree = (
                self._prev
                if not self._pending
                else self.quick.update(
                    self._prev,
                    self._pending,
                    rules=self.rules(),
                    skip=(self.state_rel, *self.excluded),
                )
            )
            if tree is not None:
                self._tree = self._prev = tree
                self._pending = set()
                return tree
        if not self.watched:
            self.facts.forget()
        index = self.state_dir / "snapshot.index"
        if index.is_symlink():  # git would read through it; the index is ours to rebuild
            index.unlink()
        crash_point("snapshot.index-lock", lambda: self.git.hold_index_lock(index))
        self._tree = self.git.snapshot(
            index,
            exclude=self.state_rel,
            facts=self.facts,
            also=self.excluded,
            rules=self.rules(),
        )
        self._prev, self._pending = self._tree, set()
        return self._tree

    def touched(self, paths: Sequence[str] | None = None) -> None:
        """The working tree may have changed (see ``Workspace.touched``)."""
        self._tree = self._start_rules = None
        if paths is None:
            self._pending = None
        elif self._pending is not None:
            self._pending.update(paths)
        if paths is None or any(PurePosixPath(p).name == ".gitignore" for p in paths):
            self.facts.forget()

    def exclude(self, paths: Sequence[str]) -> None:
        """Keep ``paths`` out of every snapshot from now on (see ``Workspace.exclude``)."""
        if self._settled.issuperset(paths):
            return  # each one excluded already or outside the tree (asked every iteration)
        state = self.state_rel.strip("/") + "/"
        rel: list[str] = []
        for path in paths:
            full = Path(os.path.abspath(self.workdir / path))
            try:
                r = full.relative_to(self.workdir).as_posix()
            except ValueError:
                self._settled.add(path)
                continue
            if r in ("", ".") or r.startswith(("../", state)) or r in self.excluded:
                self._settled.add(path)
                continue
            rel.append(r)
        if rel:  # an ignored (untracked) path is never in a snapshot: git refuses to name it
            data = b"".join(p.encode("utf-8") + b"\0" for p in rel)
            out = self.git.run("check-ignore", "-z", "--stdin", input=data, check=False)
            ignored = {p for p in out.split("\0") if p}
            kept = [p for p in rel if p not in ignored]
            if kept:
                self.excluded = tuple(sorted({*self.excluded, *kept}))
                self._tree = self._pending = None  # the next snapshot leaves them out
