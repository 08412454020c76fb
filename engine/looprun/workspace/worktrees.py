"""Linked git worktrees for sub-loops, each on a private branch, and what a crash can
leave of one (half made, half removed) cleaned up whatever state it is in."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from looprun.errors import LooprunError
from looprun.system.crashpoint import crash_point
from looprun.workspace.checkpoints import REF_PREFIX
from looprun.workspace.git import Git


def start_commit(git: Git, start: str) -> str:
    """The commit ``start`` names: a commit-ish, or a checkpoint name."""
    commit = git.run("rev-parse", "--verify", "-q", f"{start}^{{commit}}", check=False)
    if not commit.strip():
        commit = git.run(
            "rev-parse", "--verify", "-q", f"{REF_PREFIX}{start}^{{commit}}", check=False
        )
    if not commit.strip():
        raise LooprunError(f"no such commit to start a worktree from: {start}")
    return commit.strip()


def add(git: Git, path: Path, branch: str, commit: str) -> None:
    """A git worktree at ``path`` on a new branch ``branch`` from ``commit``."""
    add = ("worktree", "add", "-q", "-b", branch, str(path), commit)
    # test-only: what a kill in the middle of `git worktree add` leaves (the branch
    # made, the worktree registered but still locked, nothing checked out)
    crash_point(
        "worktree.half-made",
        lambda: git.run(*add[:3], "--lock", "--no-checkout", *add[3:]),
    )
    git.run(*add)


def discard(git: Git, path: Path, branch: str | None) -> None:
    """Remove the worktree at ``path`` and its ``branch``, whatever state a crash left
    them in (half made, half removed, or gone already)."""
    if entry(git, path) is not None:
        git.run("worktree", "unlock", str(path), check=False)
        git.run("worktree", "remove", "--force", "--force", str(path), check=False)
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)
    git.run("worktree", "prune")
    crash_point("worktree.removed")
    if branch and has_branch(git, branch):
        delete_branch(git, branch)


def entry(git: Git, path: Path) -> dict[str, str] | None:
    """``git worktree list`` 's record of the worktree at ``path`` (None: unknown)."""
    out = git.run("worktree", "list", "--porcelain", "-z")
    for block in out.split("\0\0"):
        record: dict[str, str] = {}
        for field in block.split("\0"):
            key, _, value = field.partition(" ")
            if key:
                record[key] = value
        wt = record.get("worktree")
        if wt and os.path.realpath(wt) == os.path.realpath(path):
            return record
    return None


def has_branch(git: Git, branch: str) -> bool:
    ref = f"refs/heads/{branch}"
    return bool(git.run("rev-parse", "--verify", "-q", ref, check=False).strip())


def remove(git: Git, path: Path) -> None:
    git.run("worktree", "remove", "--force", str(path))
    git.run("worktree", "prune")


def keep_branch(worktree: Path, branch: str, commit: str) -> None:
    """Point the worktree's branch at ``commit`` (its last state) and reset the
    worktree's index to it, so failed work stays inspectable on the branch."""
    git = Git(worktree)
    git.run("update-ref", f"refs/heads/{branch}", commit)
    git.run("reset", "-q")


def delete_branch(git: Git, branch: str) -> None:
    """Delete a private branch made for a worktree (never the current branch)."""
    git.run("branch", "-D", "-q", branch)
