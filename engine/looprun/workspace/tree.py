"""The working tree as git sees it: a base, checkpoints, rollback, diffs and merges.

Everything goes through git plumbing with a private index file, so the user's branch,
index, HEAD and stash are never touched (only ``commit_to_branch``, for ``--commit``,
moves the branch). Checkpoints are commits on private refs, ``refs/looprun/<ref>``.

A workdir that is not the top of a git repository (a plain directory, or a
subdirectory of a repository) gets a private repository at ``<state_dir>/git`` whose
work tree is the workdir, so diff and rollback work the same everywhere. The state
directory itself is never part of a snapshot.

``Workspace`` is the one object the rest of the engine holds; the parts live beside it:
snapshots (``current.py``), checkpoints, diffs, checkout, worktrees, the branch, locks.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from looprun.data.changes import FileChange
from looprun.errors import UsageError
from looprun.system import safefs
from looprun.system.atomic import write_atomic
from looprun.system.proc import spawned
from looprun.workspace import branch as on_branch
from looprun.workspace import checkout, lock, worktrees
from looprun.workspace.checkpoints import REF_PREFIX, Checkpoints
from looprun.workspace.control import ControlFiles
from looprun.workspace.current import CurrentTree, state_rel
from looprun.workspace.diffs import Differ
from looprun.workspace.git import EMPTY_TREE, Git
from looprun.workspace.ignore import exclude_locally, ignored_paths, remember_ignore_rules
from looprun.workspace.merge import MergeResult, three_way
from looprun.workspace.snapshots import QuickSnapshots


class Workspace:
    """Snapshots and rollback of one working tree, on private refs."""

    def __init__(
        self, workdir: Path, git: Git, state_dir: Path, *, private: bool, watched: bool = False
    ):
        self.workdir = workdir
        self.git = git
        self.state_dir = state_dir
        self.private = private
        self.watched = watched
        self._now = CurrentTree(git, workdir, state_dir, watched=watched)
        self._checkpoints = Checkpoints(self._now)
        self._diffs = Differ(git, self._now.quick, watched=watched)
        self._dot_git = _dot_git(workdir)
        self._control: ControlFiles | None = None
        self._control_changed: list[str] = []
        self._verified_at = -1  # the command count when the control files were compared

    def _hold_control_files(self) -> None:
        """Take the repository's control files as they are now, before any command runs."""
        own, common = self.git.git_dirs()
        self._control = ControlFiles(own, common, shown_from=self.workdir)

    def _guard(self, *, always: bool = False) -> None:
        """Put back the control files a command changed, before the engine's git reads
        them (see :mod:`looprun.workspace.control`); what changed is reported by
        :meth:`repository_changed`. Skipped when no command started since the last
        comparison, unless ``always`` (a command ended: others may run beside it, and a
        process one left running may write later)."""
        started = spawned()
        if self._control is None or (started == self._verified_at and not always):
            return
        self._verified_at = started
        for name in self._control.verify():
            if name not in self._control_changed:
                self._control_changed.append(name)

    @property
    def quick(self) -> QuickSnapshots:
        """The repository's objects and refs as written in-process, where git's files
        backend lets them be (see :mod:`looprun.workspace.snapshots`)."""
        return self._now.quick

    @classmethod
    def open(
        cls, workdir: Path, *, state_dir: Path, base: str | None = None, watched: bool = False
    ) -> Workspace:
        """Open ``workdir``; ``base`` adopts a base recorded earlier (when resuming).

        ``watched``: the caller calls :meth:`touched` after anything that may have
        written to the working tree (tools, observers' commands), so snapshots are reused.
        """
        workdir = Path(os.path.realpath(workdir))
        if not workdir.is_dir():
            raise UsageError(f"{workdir}: the working directory does not exist")
        state_dir = safefs.checked_dir(Path(os.path.abspath(state_dir)))
        top, pinned = Git(workdir).located()
        if top and pinned is not None and Path(os.path.realpath(top)) == workdir:
            ws = cls(workdir, pinned, state_dir, private=False, watched=watched)
        else:
            private = _private_repo(workdir, state_dir / "git")
            ws = cls(workdir, private, state_dir, private=True, watched=watched)
            if top:  # a subdirectory: keep the state out of the enclosing repo's status too
                outer_dir = Path(os.path.realpath(top))
                _exclude_state_dir(Git(outer_dir), state_rel(outer_dir, state_dir))
        _exclude_state_dir(ws.git, ws._now.state_rel)
        ws._hold_control_files()
        if base is not None:
            ws._adopt_base(ws.tree_of(base))
        return ws

    def _adopt_base(self, tree: str) -> None:
        self._now.base = tree
        saved = safefs.read_bytes(self._base_file("ignore"))
        if saved is not None:
            remember_ignore_rules(self.git, tree, saved.decode("utf-8", "surrogateescape"))

    # -- snapshots ---------------------------------------------------------------------

    def snapshot(self) -> str:
        """The tree of the working tree now: tracked and untracked files, not ignored ones.

        What is ignored is decided by the ignore rules of the base (see
        ``ignore.base_ignore_rules``): a ``.gitignore`` the run writes hides nothing.
        A persistent private index keeps git's stat cache, so unchanged files are not
        hashed again. It starts from HEAD, so tracked files that match an ignore rule
        are part of the snapshot too. A watched workspace reuses its last snapshot
        until :meth:`touched`.
        """
        self._guard()
        return self._now.snapshot()

    def touched(self, paths: Sequence[str] | None = None) -> None:
        """The working tree may have changed: look again. ``paths``: only these files were
        written (HEAD stays, and the ignore rules unless one is a ``.gitignore``); None:
        anything may have changed (a command ran)."""
        self._guard(always=paths is None)
        self._now.touched(paths)

    @property
    def excluded(self) -> tuple[str, ...]:
        """Workdir-relative paths kept out of every snapshot (observers' reports)."""
        return self._now.excluded

    def exclude(self, paths: Sequence[str]) -> None:
        """Keep ``paths`` (workdir-relative or absolute; observers' report files) out of
        every snapshot from now on, so they are never part of a diff, a rollback or a
        commit. A path outside the working tree is ignored."""
        self._now.exclude(paths)

    def base(self) -> str:
        """Tree of the start state (HEAD plus the dirty working tree), recorded once,
        with the ignored files present then (so a rollback can remove those added since)."""
        if self._now.base is None:
            rules = self._now.rules()
            tree = self.snapshot()
            self._checkpoints.anchor(f"{REF_PREFIX}base/{tree}", tree, "looprun base")
            self._now.base = tree
            remember_ignore_rules(self.git, tree, rules)
            ignored = b"".join(
                p.encode("utf-8", "surrogateescape") + b"\0" for p in self._ignored()
            )
            # one directory: the second write's directory fsync carries both renames
            write_atomic(
                self._base_file("ignore"),
                rules.encode("utf-8", "surrogateescape"),
                nofollow=True,
                sync="content",
            )
            write_atomic(self._base_file("ignored"), ignored, nofollow=True)
        return self._now.base

    def _ignored(self) -> set[str]:
        return ignored_paths(
            self.git, self._now.rules(), exclude=self._now.state_rel, head=self._now.head()
        )

    def _base_file(self, kind: str) -> Path:
        """Where the ignore rules (``ignore``) and the ignored paths (``ignored``) of the
        base are kept, so a resumed run judges with the same ones."""
        return self.state_dir / "bases" / f"{self.base()[:16]}.{kind}"

    def describe_base(self) -> str:
        """What the start state holds besides HEAD: '' when it is exactly HEAD."""
        base = self.base()
        head = self._now.head()
        if head:
            start = self.tree_of(head)
            label = f"HEAD ({head[:10]})"
        else:
            start, label = EMPTY_TREE, "an empty repository (no commit yet)"
        by: dict[str, list[str]] = {"A": [], "M": [], "D": []}
        for _, _, status, path in self._diffs.raw(start, base) if start != base else ():
            by.get(status, by["M"]).append(path)
        if not any(by.values()):
            return f"the run starts from {label}, with no uncommitted changes"
        parts = []
        for status, noun in (("M", "modified"), ("D", "deleted"), ("A", "untracked or added")):
            paths = by[status]
            if paths:
                more = f" and {len(paths) - 5} more" if len(paths) > 5 else ""
                shown = ", ".join(paths[:5]) + more
                parts.append(f"{len(paths)} {noun} ({shown})")
        return (
            f"the run starts from {label} plus the working tree's "
            + "; ".join(parts)
            + ": these are part of the start, not of the run's changes"
        )

    def repository_changed(self) -> list[tuple[str, str]]:
        """What commands changed in ``.git`` since the workspace was opened, as (path,
        message) pairs, each reported once; [] when nothing.

        The engine's git calls are pinned to the repository found at the start, so a
        rewritten ``.git`` redirects none of them; it is still reported, and a linked
        worktree's ``.git`` file is put back, so the user's git finds its repository.
        A changed control file (config, hooks, ``info/``, replace refs...) was put back
        as it was before the command, so the engine never acted on it.
        """
        self._guard(always=True)
        found = [
            (name, f"{name} was changed by a command; it was put back as it was before")
            for name in self._control_changed
        ]
        self._control_changed.clear()
        now = _dot_git(self.workdir)
        if now == self._dot_git:
            return found
        kind, content = self._dot_git
        restored = ""
        if kind == "file" and now[0] != "dir":
            write_atomic(self.workdir / ".git", content)
            restored = "; it was put back"
        where = self.git.git_dir or self.workdir / ".git"
        message = f".git was changed during the run, the engine kept using {where}{restored}"
        return [*found, (".git", message)]

    # -- checkpoints and rollback ------------------------------------------------------

    def checkpoint(self, ref: str) -> str:
        """Commit the working tree as it is to ``refs/looprun/<ref>``; returns the commit.

        A tree unchanged since the last checkpoint (same HEAD) gets that checkpoint's
        commit back, already anchored by its ref: no new commit, and for an iteration's
        checkpoint (a name ending in its number) no new ref either, so an iteration that
        changed nothing costs no git call; other names get their ref.
        """
        self._guard()
        return self._checkpoints.checkpoint(ref)

    def tree_of(self, ref_or_sha: str) -> str:
        """The tree a checkpoint name, ref, commit or tree stands for."""
        return self._checkpoints.tree_of(ref_or_sha)

    def restore(self, ref_or_sha: str) -> None:
        """Make the working tree exactly the snapshot ``ref_or_sha``.

        Modified and deleted files come back, files added since are removed, and so are
        ignored files and directories that were not there when the run started. The
        state directory is left alone, and so are the user's index and HEAD.
        Directories emptied by the removal are removed too.
        """
        self._guard()
        target = self.tree_of(ref_or_sha)
        self._apply(self.snapshot(), target)
        raw = safefs.read_bytes(self._base_file("ignored"))
        if raw is not None:  # else a base recorded before ignored files were: keep them
            before = {p.decode("utf-8", "surrogateescape") for p in raw.split(b"\0") if p}
            checkout.remove_ignored(self.workdir, self._ignored() - before, self._now.state_rel)
        self.touched()

    def _apply(self, current: str, target: str) -> list[str]:
        if current == target:
            return []
        return checkout.apply(self.git, self.workdir, self._diffs.raw(current, target), target)

    # -- diffs -------------------------------------------------------------------------

    def diff(self, base: str | None = None) -> str:
        """Unified diff of the working tree against ``base`` (default: the recorded base)."""
        return self._diffs.patch(self._start(base), self.snapshot())[0]

    def diff_parts(self, base: str | None = None) -> tuple[str, ...]:
        """:meth:`diff` as one part per changed path, in git's order (joined, the diff);
        a part that did not change since the last call is the same string."""
        return self._diffs.parts(self._start(base), self.snapshot())

    def changed_files(self, base: str | None = None) -> list[str]:
        return self._diffs.patch(self._start(base), self.snapshot())[1]

    def numstat(self, base: str | None = None) -> list[tuple[str, int | None, int | None]]:
        """``(path, added, removed)`` per changed file against ``base``; None for binary."""
        return self._diffs.numstat(self._start(base), self.snapshot())

    def file_changes(
        self, since: str, until: str | None = None, *, contents: bool = False
    ) -> list[FileChange]:
        """Each path that differs between ``since`` and ``until`` (default: now), with
        its old and new text when ``contents`` (None for a binary or absent side)."""
        a = self.tree_of(since)
        b = self.tree_of(until) if until else self.snapshot()
        return self._diffs.file_changes(a, b, contents=contents)

    def _start(self, base: str | None) -> str:
        return self.tree_of(base) if base else self.base()

    # -- the user's branch -------------------------------------------------------------

    def commit_to_branch(self, message: str, only: Sequence[str] | None = None) -> str:
        """Commit on the current branch (``--commit`` only).

        With ``only`` (the paths a run changed), the commit is HEAD plus those paths as
        they are now: the user's other uncommitted or untracked work stays out of it, and
        of the index entries only those paths are reset to the new commit. Without it,
        the whole working tree is committed and the index reset to it, as after
        ``git add -A && git commit``. Plumbing only: no hooks, no editor.
        """
        if self.private:
            raise UsageError(f"{self.workdir} is not a git repository; nothing to commit to")
        commit = on_branch.commit(self.git, self.snapshot(), message, only)
        self.touched()  # HEAD moved
        self.reset_index(only)
        return commit

    def reset_index(self, only: Sequence[str] | None) -> None:
        """The user's index entries of ``only`` (all with None) set to HEAD's."""
        on_branch.reset_index(self.git, only)

    def made_commit(self, parent: str, run_id: str) -> str | None:
        """HEAD, when it is run ``run_id``'s ``--commit`` commit on top of ``parent`` (made
        before a crash); else None (see ``branch.made_commit``)."""
        return on_branch.made_commit(self.git, parent, run_id)

    # -- worktrees and merges ----------------------------------------------------------

    def add_worktree(self, path: Path, branch: str, start: str) -> Workspace:
        """A git worktree at ``path`` on a new private branch from commit ``start``."""
        self._guard()
        commit = worktrees.start_commit(self.git, start)
        path = Path(os.path.abspath(path))
        worktrees.add(self.git, path, branch, commit)
        sub = Workspace.open(path, state_dir=path / ".looprun")
        sub._now.base = sub.tree_of(commit)
        return sub

    def ensure_worktree(self, path: Path, branch: str, start: str) -> bool:
        """The worktree at ``path`` on ``branch``, made from ``start`` unless a sound one
        is there already (a resumed sub-loop's). What a crash left half-made (a worktree
        git still marks locked while initializing, a directory git does not know, a
        branch without its worktree) is removed and made again; True when that
        happened. The sub-loop's own state restores its content."""
        path = Path(os.path.abspath(path))
        entry = worktrees.entry(self.git, path)
        if entry is not None and "locked" not in entry and (path / ".git").exists():
            return False
        leftovers = entry is not None or path.exists() or worktrees.has_branch(self.git, branch)
        self.discard_worktree(path, branch)
        self.add_worktree(path, branch, start)
        return leftovers

    def discard_worktree(self, path: Path, branch: str | None) -> None:
        """Remove the worktree at ``path`` and its ``branch``, whatever state a crash left
        them in (half made, half removed, or gone already)."""
        worktrees.discard(self.git, Path(os.path.abspath(path)), branch)

    def remove_worktree(self, path: Path) -> None:
        worktrees.remove(self.git, Path(os.path.abspath(path)))

    def keep_branch(self, worktree: Path, branch: str, commit: str) -> None:
        """Point the worktree's branch at ``commit`` (its last state) and reset the
        worktree's index to it, so failed work stays inspectable on the branch."""
        worktrees.keep_branch(Path(os.path.abspath(worktree)), branch, commit)

    def keep_ref(self, ref: str, commit: str) -> None:
        """Point the private ``ref`` at ``commit``: an attempt kept for inspection."""
        self.git.run("update-ref", ref, commit)

    def delete_branch(self, branch: str) -> None:
        """Delete a private branch made for a worktree (never the current branch)."""
        worktrees.delete_branch(self.git, branch)

    def merge_from(self, other_commit: str, base_commit: str) -> MergeResult:
        """Apply the changes ``other_commit`` made relative to ``base_commit`` onto this
        working tree, three-way. On conflict nothing changes and the paths are reported.
        """
        base, other = self.tree_of(base_commit), self.tree_of(other_commit)
        ours = self.snapshot()
        merged = three_way(self.git, base, ours, other)
        if not merged.ok or merged.tree is None or other == base:
            return merged
        changed = self._apply(ours, merged.tree)
        self.touched()
        return replace(merged, changed=tuple(changed))

    # -- crash recovery ----------------------------------------------------------------

    def clear_stale_locks(self, run_id: str, *, grace_s: float = lock.LOCK_GRACE_S) -> list[Path]:
        """Remove the lock files a killed run left behind, so the tree is not blocked
        (see ``lock.clear_stale_locks``: only while holding the run lock)."""
        return lock.clear_stale_locks(self.git, self.state_dir, run_id, grace_s=grace_s)


def _exclude_state_dir(git: Git, rel: str) -> None:
    """``.looprun/`` in info/exclude: local to this clone, never committed."""
    line = "/" + rel.strip("/") + "/"
    if not line.startswith("/.."):  # else the state directory is outside the work tree
        exclude_locally(git, line)


def _dot_git(workdir: Path) -> tuple[str, bytes]:
    """What ``workdir/.git`` is: a directory, a file (with its content) or something else."""
    path = workdir / ".git"
    if path.is_symlink() or not path.exists():
        return ("other", os.readlink(path).encode() if path.is_symlink() else b"")
    if path.is_dir():
        return ("dir", b"")
    return ("file", path.read_bytes())


def _private_repo(workdir: Path, git_dir: Path) -> Git:
    os.close(safefs.open_dir(git_dir, create=True))  # never a link to a repository elsewhere
    git = Git(workdir, git_dir)
    if not (git_dir / "HEAD").exists():
        git.run("init", "-q")
        # No core.worktree: linked worktrees made for sub-loops must not inherit it.
        git.run("config", "--unset", "core.worktree", check=False)
    return git
