"""Checkpoints: commits of snapshots on private refs, ``refs/looprun/<name>``, and the
trees that names, refs and object ids stand for.

The user's branch, index and HEAD are never touched: a checkpoint's parent is HEAD, and
only its ref moves. A watched workspace moves its refs through one long-lived
``git update-ref --stdin``, or in-process where the repository allows it.
"""

from __future__ import annotations

import re
import weakref

from looprun.errors import LooprunError
from looprun.workspace.current import CurrentTree
from looprun.workspace.long_lived import RefUpdates
from looprun.workspace.objects import loose_tree_of

REF_PREFIX = "refs/looprun/"
_HEX = frozenset("0123456789abcdef")
# Ref names made only of these parts are valid for git; others are asked of git.
_SAFE_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*")


class Checkpoints:
    """The checkpoints of one working tree (``now``: its snapshots and HEAD)."""

    def __init__(self, now: CurrentTree):
        self.now = now
        self.git = now.git
        self._refs: RefUpdates | None = None
        self._trees: dict[str, str] = {}  # object id -> its tree (never changes)
        self._last: tuple[str, str | None, str] | None = None  # tree, parent, commit

    def checkpoint(self, ref: str) -> str:
        """Commit the working tree to ``refs/looprun/<ref>`` (see ``Workspace.checkpoint``)."""
        name = REF_PREFIX + ref
        if not all(_SAFE_REF.fullmatch(p) and not p.endswith(".lock") for p in ref.split("/")):
            code, _, _ = self.git.run_status("check-ref-format", name)
            if code != 0:
                raise LooprunError(f"invalid checkpoint name {ref!r}")
        tree = self.now.snapshot()
        last = self._last
        if last is not None and last[:2] == (tree, self.now.head()):
            if not ref.rsplit("/", 1)[-1].isdigit():
                self.git.run("update-ref", "-m", f"looprun checkpoint {ref}", name, last[2])
            return last[2]
        return self.anchor(name, tree, f"looprun checkpoint {ref}")

    def anchor(self, ref: str, tree: str, message: str) -> str:
        """A commit of ``tree`` on top of HEAD, at ``ref``; returns the commit."""
        parents: list[str] = []
        head = self.now.head()
        if head:
            parents = ["-p", head]
        quick = self.now.quick
        commit = (
            quick.commit(tree, parents[1:], message)
            or self.git.run("commit-tree", tree, *parents, "-m", message).strip()
        )
        if quick.set_ref(ref, commit):
            pass
        elif self.now.watched:
            if self._refs is None:
                self._refs = RefUpdates(self.git, "looprun checkpoint")
                weakref.finalize(self, self._refs.close)
            self._refs.update(ref, commit)
        else:
            self.git.run("update-ref", "-m", message, ref, commit)
        self._last = (tree, head, commit)
        self._trees[commit] = tree
        return commit

    def tree_of(self, ref_or_sha: str) -> str:
        """The tree a checkpoint name, ref, commit or tree stands for."""
        known = self._trees.get(ref_or_sha)
        if known is not None:
            return known
        full = len(ref_or_sha) == 40 and set(ref_or_sha) <= _HEX
        repo = self.now.quick.repo() if full else None
        tree = None if repo is None else loose_tree_of(repo.objects, ref_or_sha)
        if tree is not None:  # a full object id, stored loose: read here
            self._trees[ref_or_sha] = tree
            return tree
        # a full id is what it says before it is a checkpoint's name
        candidates = (
            (ref_or_sha, REF_PREFIX + ref_or_sha) if full else (REF_PREFIX + ref_or_sha, ref_or_sha)
        )
        for candidate in candidates:
            out = self.git.run("rev-parse", "--verify", "-q", f"{candidate}^{{tree}}", check=False)
            if out.strip():
                if len(ref_or_sha) >= 40 and set(ref_or_sha) <= _HEX:  # an object id: fixed
                    self._trees[ref_or_sha] = out.strip()
                return out.strip()
        raise LooprunError(f"no such checkpoint or snapshot: {ref_or_sha}")
