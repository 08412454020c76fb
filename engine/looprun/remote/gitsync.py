"""The git transport of remote sub-loops: what crosses between the outer loop and a worker.

Repository content, checkpoints and the (redacted) journal of a sub-loop travel as git
objects through a remote both sides reach. Per sub-loop run ``R`` the remote holds:

- ``refs/looprun-sync/R/start``: the commit the sub-loop starts from (pushed by the outer);
- ``refs/looprun/R/*``: the sub-loop's checkpoints, as in a local run (``final`` at the end);
- ``refs/looprun-sync/R/journal``: a commit of the sub-loop's run directory;
- ``refs/looprun-sync/R/lease``: the fence. Each lease commit names an execution token.

Fencing is compare-and-swap on the lease ref: every push a worker makes moves the lease
from the commit it last saw to a new one, atomically with the checkpoints and journal
(``git push --atomic --force-with-lease``), so a push from an execution that lost the
lease is refused as a whole, and of two executions claiming one lease exactly one wins.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path

from looprun.data.value import valueclass
from looprun.errors import LooprunError, UsageError
from looprun.journal import gc
from looprun.journal.handoff import (  # run directories as git trees, re-exported
    commit_directory as commit_directory,
)
from looprun.journal.handoff import extract_commit as extract_commit
from looprun.workspace.git import EMPTY_TREE, Git

SYNC_PREFIX = gc.SYNC_PREFIX  # pruned by `looprun gc`
_TOKEN = re.compile(r"^token: (\S+)$", re.MULTILINE)
_EXECUTION = re.compile(r"^execution: (\S+)$", re.MULTILINE)


class LeaseLost(LooprunError):
    """Another execution holds the sub-loop's lease: this one must stop, its work unsent."""


@valueclass
class Lease:
    """One lease commit: who may push, and when it was last moved (for the watchdog)."""

    sha: str
    token: str
    execution: str
    time: int  # committer time, seconds since the epoch


def sync_ref(run_id: str, name: str) -> str:
    return f"{SYNC_PREFIX}{run_id}/{name}"


def checkpoint_refs(run_id: str) -> str:
    return f"refs/looprun/{run_id}/*"


def outer_git(repository: str) -> Git:
    """The git of the outer loop's repository, a private one for a work tree without."""
    path = Path(repository)
    git = Git(path)
    if git.is_repo():
        return git
    private = path / ".looprun" / "git"  # a work tree without git of its own
    if private.is_dir():
        return Git(path, private)
    raise UsageError(f"{repository}: sub-loops on Ray need a git repository to travel through")


def git_dir(git: Git) -> Path:
    """The absolute git directory of ``git``'s repository."""
    if git.git_dir is not None:
        return git.git_dir
    return Path(git.run("rev-parse", "--absolute-git-dir").strip())


def _made(sha: str, token: str, execution: str) -> Lease:
    """The lease commit this process just made and pushed, as reading it back would
    find it (its committer time is now), without two more git processes per push."""
    return Lease(sha, token, execution, int(time.time()))


class Remote:
    """Pushes and fetches between one local repository and the shared remote ``url``."""

    def __init__(self, git: Git, url: str):
        self.git, self.url = git, url
        self._empty_tree = False  # written into this repository for the lease commits

    def same_repository(self) -> bool:
        """Whether ``url`` is this repository itself (workers sharing its file system)."""
        try:
            return Path(self.url).resolve() == git_dir(self.git).resolve()
        except (OSError, LooprunError):
            return False

    # -- plain transfers ----------------------------------------------------------------

    def fetch(self, *refspecs: str) -> None:
        """Fetch ``refspecs`` (missing source refs are not an error: nothing was pushed)."""
        for spec in refspecs:
            src = spec.lstrip("+").split(":", 1)[0]
            if self.ls(src):
                self.git.run("fetch", "-q", "--no-tags", self.url, spec)

    def ls(self, *patterns: str) -> dict[str, str]:
        """Refs on the remote matching any of ``patterns`` (refs or globs), name -> sha."""
        out = self.git.run("ls-remote", "--refs", self.url, *patterns, check=False)
        refs: dict[str, str] = {}
        for line in out.splitlines():
            sha, _, name = line.partition("\t")
            if name:
                refs[name] = sha
        return refs

    def push(self, refspecs: Sequence[str], *, lease: tuple[str, str] | None = None) -> bool:
        """Push ``refspecs`` atomically; with ``lease`` (ref, expected sha, "" for absent)
        the remote must still hold that value. False when the remote refused the lease."""
        args = ["push", "-q", "--atomic", "--no-verify"]
        if lease is not None:
            args.append(f"--force-with-lease={lease[0]}:{lease[1]}")
        code, _, err = self.git.run_status(*args, self.url, *refspecs)
        if code == 0:
            return True
        if lease is not None and ("stale info" in err or "fetch first" in err or "rejected" in err):
            return False
        raise LooprunError(f"git push to {self.url} failed: {err.strip()}")

    # -- the lease ----------------------------------------------------------------------

    def lease(self, run_id: str) -> Lease | None:
        """The lease as the remote holds it now, or None before the first grant."""
        ref = sync_ref(run_id, "lease")
        sha = self.ls(ref).get(ref)
        if sha is None:
            return None
        self.git.run("fetch", "-q", "--no-tags", self.url, ref)
        return self._read(sha)

    def _read(self, sha: str) -> Lease:
        text = self.git.run("cat-file", "commit", sha)
        token = _TOKEN.search(text)
        execution = _EXECUTION.search(text)
        stamp = self.git.run("log", "-1", "--format=%ct", sha).strip()
        return Lease(
            sha,
            token.group(1) if token else "",
            execution.group(1) if execution else "",
            int(stamp or 0),
        )

    def _lease_commit(self, token: str, execution: str, parent: str | None, note: str) -> str:
        if not self._empty_tree:
            self.git.run("hash-object", "-t", "tree", "-w", "--stdin", input=b"")
            self._empty_tree = True
        body = f"looprun lease: {note}\n\ntoken: {token}\nexecution: {execution}\n"
        parents = ["-p", parent] if parent else []
        return self.git.run("commit-tree", EMPTY_TREE, *parents, "-m", body).strip()

    def grant(self, run_id: str, token: str) -> Lease:
        """The outer loop hands the sub-loop to a new execution token (fencing out every
        earlier one). Compare-and-swap against what it read, retried if a worker moved it."""
        ref = sync_ref(run_id, "lease")
        for _ in range(20):
            current = self.lease(run_id)
            parent = current.sha if current else None
            sha = self._lease_commit(token, "-", parent, "granted")
            if self.push([f"{sha}:{ref}"], lease=(ref, parent or "")):
                return _made(sha, token, "-")
        raise LooprunError(f"could not grant the lease of {run_id}: it keeps moving")

    def claim(self, run_id: str, token: str, execution: str) -> Lease:
        """A worker takes the lease granted to ``token`` for its own ``execution``;
        of two executions of one job exactly one gets it."""
        current = self.lease(run_id)
        if current is None or current.token != token:
            raise LeaseLost(f"{run_id}: the lease belongs to another attempt")
        if current.execution != "-":
            raise LeaseLost(f"{run_id}: execution {current.execution} already holds the lease")
        ref = sync_ref(run_id, "lease")
        sha = self._lease_commit(token, execution, current.sha, "claimed")
        if not self.push([f"{sha}:{ref}"], lease=(ref, current.sha)):
            raise LeaseLost(f"{run_id}: another execution claimed the lease first")
        return _made(sha, token, execution)

    def publish(self, run_id: str, held: Lease, refspecs: Sequence[str], note: str) -> Lease:
        """Push ``refspecs`` together with a moved lease, all or nothing; LeaseLost if the
        lease moved under us (the outer loop gave the sub-loop to another execution)."""
        ref = sync_ref(run_id, "lease")
        sha = self._lease_commit(held.token, held.execution, held.sha, note)
        if not self.push([f"{sha}:{ref}", *refspecs], lease=(ref, held.sha)):
            raise LeaseLost(f"{run_id}: the lease was taken over; this execution's work is void")
        return _made(sha, held.token, held.execution)
