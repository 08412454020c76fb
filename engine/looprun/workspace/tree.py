"""The working tree as git sees it: a base, checkpoints, rollback, diffs and merges.

Everything goes through git plumbing with a private index file, so the user's branch,
index, HEAD and stash are never touched (only ``commit_to_branch``, for ``--commit``,
moves the branch). Checkpoints are commits on private refs, ``refs/looprun/<ref>``.

A workdir that is not the top of a git repository (a plain directory, or a
subdirectory of a repository) gets a private repository at ``<state_dir>/git`` whose
work tree is the workdir, so diff and rollback work the same everywhere. The state
directory itself is never part of a snapshot.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import glob
import os
import re
import shutil
import tempfile
import time
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from looprun.data.changes import FileChange
from looprun.errors import LooprunError, UsageError
from looprun.system import safefs
from looprun.system.atomic import write_atomic
from looprun.system.crashpoint import crash_point
from looprun.workspace.git import (
    EMPTY_TREE,
    Git,
    GitError,
    RefUpdates,
    SnapshotFacts,
    TreeDiffs,
    base_ignore_rules,
    current_ignore_rules,
    remember_ignore_rules,
)
from looprun.workspace.objects import path_tree
from looprun.workspace.patches import PatchCache, split_diff
from looprun.workspace.snapshots import QuickSnapshots

REF_PREFIX = "refs/looprun/"
LOCK_GRACE_S = 1.0
_GITLINK = "160000"
_HEX = frozenset("0123456789abcdef")
# Ref names made only of these parts are valid for git; others are asked of git.
_SAFE_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*")


@dataclass(frozen=True)
class MergeResult:
    """The outcome of merging another snapshot into this working tree."""

    ok: bool
    conflicts: tuple[str, ...] = ()
    tree: str | None = None  # the merged tree, when ok
    changed: tuple[str, ...] = ()  # paths the merge changed in this working tree


class Workspace:
    """Snapshots and rollback of one working tree, on private refs."""

    def __init__(
        self, workdir: Path, git: Git, state_dir: Path, *, private: bool, watched: bool = False
    ):
        self.workdir = workdir
        self.git = git
        self.state_dir = state_dir
        self.private = private
        self._base: str | None = None
        self._excluded: tuple[str, ...] = ()
        self._settled: set[str] = set()  # paths given to ``exclude`` with a lasting answer
        # Watched: whoever writes to the tree calls ``touched``, so a snapshot is taken
        # once and reused until then (diff, changed files and checkpoint of one iteration
        # share it; an iteration that wrote nothing costs no git call at all).
        self.watched = watched
        self._tree: str | None = None
        # The last snapshot and the paths the engine's file tools wrote since (None: a
        # command ran, anything may have changed): those alone are hashed in-process.
        self._prev: str | None = None
        self._pending: set[str] | None = None
        self._quick = QuickSnapshots(git)
        # long-lived git processes for the checkpoint refs and the diffs of an iteration
        # (watched workspaces only: those run one iteration after another)
        self._refs: RefUpdates | None = None
        self._diffs: TreeDiffs | None = None
        self._patch_cache: PatchCache | None = None
        self._facts = SnapshotFacts()
        self._trees: dict[str, str] = {}  # object id -> its tree (never changes)
        self._diff: tuple[tuple[str, str], str, list[str]] | None = None
        self._last_checkpoint: tuple[str, str | None, str] | None = None  # tree, parent, commit
        self._dot_git = _dot_git(workdir)
        self._verified: set[str] = set()  # object ids whose content was checked
        self._new_side: TreeDiffs | None = None

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
        plain = Git(workdir)
        top = plain.run("rev-parse", "--show-toplevel", check=False).strip()
        if top and Path(os.path.realpath(top)) == workdir:
            ws = cls(workdir, plain.pinned(), state_dir, private=False, watched=watched)
        else:
            private = _private_repo(workdir, state_dir / "git")
            ws = cls(workdir, private, state_dir, private=True, watched=watched)
            if top:  # a subdirectory: keep the state out of the enclosing repo's status too
                outer_dir = Path(os.path.realpath(top))
                outer = cls(outer_dir, Git(outer_dir), state_dir, private=False)
                outer._exclude_state_dir()
        ws._exclude_state_dir()
        if base is not None:
            ws._adopt_base(ws.tree_of(base))
        return ws

    def _adopt_base(self, tree: str) -> None:
        self._base = tree
        saved = safefs.read_bytes(self._base_file("ignore"))
        if saved is not None:
            remember_ignore_rules(self.git, tree, saved.decode("utf-8", "surrogateescape"))

    # -- snapshots ---------------------------------------------------------------------

    def snapshot(self) -> str:
        """The tree of the working tree now: tracked and untracked files, not ignored ones.

        What is ignored is decided by the ignore rules of the base (see
        ``gitutil.base_ignore_rules``): a ``.gitignore`` the run writes hides nothing.
        A persistent private index keeps git's stat cache, so unchanged files are not
        hashed again. It starts from HEAD, so tracked files that match an ignore rule
        are part of the snapshot too. A watched workspace reuses its last snapshot
        until :meth:`touched`.
        """
        if self._tree is not None and self.watched:
            return self._tree
        if self.watched and self._prev is not None and self._pending is not None and self._base:
            tree = (
                self._prev
                if not self._pending
                else self._quick.update(
                    self._prev,
                    self._pending,
                    rules=self._rules(),
                    skip=(self._state_rel(), *self._excluded),
                )
            )
            if tree is not None:
                self._tree = self._prev = tree
                self._pending = set()
                return tree
        if not self.watched:
            self._facts.forget()
        index = self.state_dir / "snapshot.index"
        if index.is_symlink():  # git would read through it; the index is ours to rebuild
            index.unlink()
        crash_point("snapshot.index-lock", lambda: self.git.hold_index_lock(index))
        self._tree = self.git.snapshot(
            index,
            exclude=self._state_rel(),
            facts=self._facts,
            also=self._excluded,
            rules=self._rules(),
        )
        self._prev, self._pending = self._tree, set()
        return self._tree

    def _rules(self) -> str:
        if self._base is None:  # the start state: the tree's own ignore files, as they are
            return current_ignore_rules(self.git, self._state_rel())
        return base_ignore_rules(self.git, self._base)

    def touched(self, paths: Sequence[str] | None = None) -> None:
        """The working tree may have changed: look again. ``paths``: only these files were
        written (HEAD stays, and the ignore rules unless one is a ``.gitignore``); None:
        anything may have changed (a command ran)."""
        self._tree = None
        if paths is None:
            self._pending = None
        elif self._pending is not None:
            self._pending.update(paths)
        if paths is None or any(PurePosixPath(p).name == ".gitignore" for p in paths):
            self._facts.forget()

    @property
    def excluded(self) -> tuple[str, ...]:
        """Workdir-relative paths kept out of every snapshot (observers' reports)."""
        return self._excluded

    def exclude(self, paths: Sequence[str]) -> None:
        """Keep ``paths`` (workdir-relative or absolute; observers' report files) out of
        every snapshot from now on, so they are never part of a diff, a rollback or a
        commit. A path outside the working tree is ignored."""
        if self._settled.issuperset(paths):
            return  # each one excluded already or outside the tree (asked every iteration)
        state = self._state_rel().strip("/") + "/"
        rel: list[str] = []
        for path in paths:
            full = Path(os.path.abspath(self.workdir / path))
            try:
                r = full.relative_to(self.workdir).as_posix()
            except ValueError:
                self._settled.add(path)
                continue
            if r in ("", ".") or r.startswith(("../", state)) or r in self._excluded:
                self._settled.add(path)
                continue
            rel.append(r)
        if rel:  # an ignored (untracked) path is never in a snapshot: git refuses to name it
            data = b"".join(p.encode("utf-8") + b"\0" for p in rel)
            out = self.git.run("check-ignore", "-z", "--stdin", input=data, check=False)
            ignored = {p for p in out.split("\0") if p}
            kept = [p for p in rel if p not in ignored]
            if kept:
                self._excluded = tuple(sorted({*self._excluded, *kept}))
                self._tree = self._pending = None  # the next snapshot leaves them out

    def file_changes(
        self, since: str, until: str | None = None, *, contents: bool = False
    ) -> list[FileChange]:
        """Each path that differs between ``since`` and ``until`` (default: now), with
        its old and new text when ``contents`` (None for a binary or absent side)."""
        a = self.tree_of(since)
        b = self.tree_of(until) if until else self.snapshot()
        out: list[FileChange] = []
        for src_mode, dst_mode, status, path in self._raw_diff(a, b):
            if _GITLINK in (src_mode, dst_mode):
                continue
            old = new = None
            if contents:
                old = None if status == "A" else self._text(f"{a}:{path}")
                new = None if status == "D" else self._text(f"{b}:{path}")
            out.append(FileChange(path, status, old, new))
        return out

    def _text(self, spec: str) -> str | None:
        code, out, _ = self.git.run_status("cat-file", "blob", spec)
        if code != 0 or "\0" in out:
            return None
        return out

    def repository_changed(self) -> str | None:
        """What happened to ``.git`` since the workspace was opened, or None.

        The engine's git calls are pinned to the repository found at the start, so a
        rewritten ``.git`` redirects none of them; it is still reported, and a linked
        worktree's ``.git`` file is put back, so the user's git finds its repository.
        """
        now = _dot_git(self.workdir)
        if now == self._dot_git:
            return None
        kind, content = self._dot_git
        restored = ""
        if kind == "file" and now[0] != "dir":
            write_atomic(self.workdir / ".git", content)
            restored = "; it was put back"
        where = self.git.git_dir or self.workdir / ".git"
        return f".git was changed during the run, the engine kept using {where}{restored}"

    def describe_base(self) -> str:
        """What the start state holds besides HEAD: '' when it is exactly HEAD."""
        head = self.git.head()
        base = self.base()
        if head:
            start = self.tree_of(head)
            label = f"HEAD ({head[:10]})"
        else:
            start, label = EMPTY_TREE, "an empty repository (no commit yet)"
        changes = self._raw_diff(start, base)
        by: dict[str, list[str]] = {"A": [], "M": [], "D": []}
        for _, _, status, path in changes:
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

    def base(self) -> str:
        """Tree of the start state (HEAD plus the dirty working tree), recorded once,
        with the ignored files present then (so a rollback can remove those added since)."""
        if self._base is None:
            rules = self._rules()
            tree = self.snapshot()
            self._anchor(f"{REF_PREFIX}base/{tree}", tree, "looprun base")
            self._base = tree
            remember_ignore_rules(self.git, tree, rules)
            ignored = b"".join(
                p.encode("utf-8", "surrogateescape") + b"\0" for p in self._ignored()
            )
            write_atomic(
                self._base_file("ignore"), rules.encode("utf-8", "surrogateescape"), nofollow=True
            )
            write_atomic(self._base_file("ignored"), ignored, nofollow=True)
        return self._base

    def _ignored(self) -> set[str]:
        return self.git.ignored(self._rules(), exclude=self._state_rel())

    def _base_file(self, kind: str) -> Path:
        """Where the ignore rules (``ignore``) and the ignored paths (``ignored``) of the
        base are kept, so a resumed run judges with the same ones."""
        return self.state_dir / "bases" / f"{self.base()[:16]}.{kind}"

    def checkpoint(self, ref: str) -> str:
        """Commit the working tree as it is to ``refs/looprun/<ref>``; returns the commit.

        A tree unchanged since the last checkpoint (same HEAD) gets that checkpoint's
        commit back, already anchored by its ref: no new commit, and for an iteration's
        checkpoint (a name ending in its number) no new ref either, so an iteration that
        changed nothing costs no git call; other names get their ref.
        """
        name = REF_PREFIX + ref
        if not all(_SAFE_REF.fullmatch(p) and not p.endswith(".lock") for p in ref.split("/")):
            code, _, _ = self.git.run_status("check-ref-format", name)
            if code != 0:
                raise LooprunError(f"invalid checkpoint name {ref!r}")
        tree = self.snapshot()
        last = self._last_checkpoint
        if last is not None and last[:2] == (tree, self._head()):
            if not ref.rsplit("/", 1)[-1].isdigit():
                self.git.run("update-ref", "-m", f"looprun checkpoint {ref}", name, last[2])
            return last[2]
        return self._anchor(name, tree, f"looprun checkpoint {ref}")

    def _head(self) -> str | None:
        if not self.watched:
            self._facts.forget()
        return self._facts.head(self.git)

    def _anchor(self, ref: str, tree: str, message: str) -> str:
        parents: list[str] = []
        head = self._head()
        if head:
            parents = ["-p", head]
        commit = (
            self._quick.commit(tree, parents[1:], message)
            or self.git.run("commit-tree", tree, *parents, "-m", message).strip()
        )
        if self._quick.set_ref(ref, commit):
            pass
        elif self.watched:
            if self._refs is None:
                self._refs = RefUpdates(self.git, "looprun checkpoint")
                weakref.finalize(self, self._refs.close)
            self._refs.update(ref, commit)
        else:
            self.git.run("update-ref", "-m", message, ref, commit)
        self._last_checkpoint = (tree, head, commit)
        self._trees[commit] = tree
        return commit

    def tree_of(self, ref_or_sha: str) -> str:
        """The tree a checkpoint name, ref, commit or tree stands for."""
        known = self._trees.get(ref_or_sha)
        if known is not None:
            return known
        for candidate in (REF_PREFIX + ref_or_sha, ref_or_sha):
            out = self.git.run("rev-parse", "--verify", "-q", f"{candidate}^{{tree}}", check=False)
            if out.strip():
                if len(ref_or_sha) >= 40 and set(ref_or_sha) <= _HEX:  # an object id: fixed
                    self._trees[ref_or_sha] = out.strip()
                return out.strip()
        raise LooprunError(f"no such checkpoint or snapshot: {ref_or_sha}")

    # -- rollback ----------------------------------------------------------------------

    def restore(self, ref_or_sha: str) -> None:
        """Make the working tree exactly the snapshot ``ref_or_sha``.

        Modified and deleted files come back, files added since are removed, and so are
        ignored files and directories that were not there when the run started. The
        state directory is left alone, and so are the user's index and HEAD.
        Directories emptied by the removal are removed too.
        """
        target = self.tree_of(ref_or_sha)
        self._apply(self.snapshot(), target)
        self._remove_new_ignored()
        self.touched()

    def _remove_new_ignored(self) -> None:
        raw = safefs.read_bytes(self._base_file("ignored"))
        if raw is None:
            return  # a base recorded before ignored files were: nothing to compare with
        before = {p.decode("utf-8", "surrogateescape") for p in raw.split(b"\0") if p}
        state = self._state_rel().strip("/") + "/"
        for rel in sorted(self._ignored() - before):
            if (rel.rstrip("/") + "/").startswith(state) or state.startswith(rel):
                continue  # never the state directory, nor a directory holding it
            full = self.workdir / rel.rstrip("/")
            if full.is_dir() and not full.is_symlink():
                shutil.rmtree(full, ignore_errors=True)
            elif full.is_symlink() or full.exists():
                full.unlink()
            _prune_empty_dirs(full.parent, self.workdir)

    def _apply(self, current: str, target: str) -> list[str]:
        if current == target:
            return []
        removed: list[str] = []
        written: list[str] = []
        for src_mode, dst_mode, status, path in self._raw_diff(current, target):
            if _GITLINK in (src_mode, dst_mode):
                continue  # submodules are their own repositories; leave them be
            if status == "D" or status == "T":
                removed.append(path)
            if status != "D":
                written.append(path)
        for path in removed:
            full = self.workdir / path
            if full.is_symlink() or full.is_file():
                full.unlink()
                _prune_empty_dirs(full.parent, self.workdir)
        if written:
            with self._temp_index() as env:
                self.git.run("read-tree", target, env=env)
                data = b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in written)
                self.git.run("checkout-index", "-f", "-z", "--stdin", env=env, input=data)
        return sorted(set(removed) | set(written))

    def _raw_diff(self, a: str, b: str) -> Iterator[tuple[str, str, str, str]]:
        out = self.git.run("diff-tree", "-r", "-z", "--no-renames", "--raw", a, b)
        fields = out.split("\0")
        i = 0
        while i + 1 < len(fields):
            meta, path = fields[i], fields[i + 1]
            i += 2
            if not meta.startswith(":"):
                continue
            src_mode, dst_mode, _, _, status = meta[1:].split(" ")
            yield src_mode, dst_mode, status[:1], path

    @contextlib.contextmanager
    def _temp_index(self) -> Iterator[dict[str, str]]:
        with tempfile.TemporaryDirectory(prefix="looprun-index-") as tmp:
            yield {"GIT_INDEX_FILE": os.path.join(tmp, "index")}

    # -- diffs -------------------------------------------------------------------------

    def diff(self, base: str | None = None) -> str:
        """Unified diff of the working tree against ``base`` (default: the recorded base)."""
        return self._diff_against(base)[0]

    def _diff_against(self, base: str | None) -> tuple[str, list[str]]:
        """The patch and the changed paths; remembered for the pair of trees (a diff of
        two trees never changes). A watched workspace keeps each path's part between
        iterations and asks git only for what changed since (``patches.PatchCache``)."""
        start = self.tree_of(base) if base else self.base()
        tree = self.snapshot()
        if self._diff is not None and self._diff[0] == (start, tree):
            return self._diff[1], list(self._diff[2])
        self._check_new_objects(start, tree)
        if self.watched:
            patch, paths = self._patches().diff(start, tree)
        else:
            patch, paths = split_diff(self.git.diff(start, tree, "--patch-with-raw", "-z"))
        self._diff = ((start, tree), patch, paths)
        return patch, list(paths)

    def _check_new_objects(self, start: str, tree: str) -> None:
        """The trees and blobs a diff from ``start`` to ``tree`` reads on the new side,
        checked once each against their ids (see ``Git.check_objects``)."""
        if tree in self._verified or tree == start:
            return
        if self.watched:  # one long-lived diff-tree for the run, as for the patches
            if self._new_side is None:
                self._new_side = TreeDiffs(self.git, "-t", "--raw", "-z")
                weakref.finalize(self, self._new_side.close)
            out = self._new_side.diff(start, tree)
        else:
            out = self.git.run("diff-tree", "-r", "-t", "-z", "--no-renames", "--raw", start, tree)
        ids = [tree]
        for meta in out.split("\0"):
            if meta.startswith(":"):
                _, dst_mode, _, new, _ = meta[1:].split(" ")
                if dst_mode != _GITLINK and new.strip("0"):
                    ids.append(new)
        fresh = [i for i in dict.fromkeys(ids) if i not in self._verified]
        repo = self._quick.repo()
        if repo is not None:  # SHA-1: loose objects are read in-process
            self.git.check_objects(fresh, repo.objects)
        else:
            algorithm = self.git.run("rev-parse", "--show-object-format").strip()
            self.git.check_objects(fresh, algorithm=algorithm)
        self._verified.update(fresh)

    def _patches(self) -> PatchCache:
        if self._patch_cache is None:
            diffs = self._diffs = TreeDiffs(self.git, "--patch-with-raw", "-z")
            weakref.finalize(self, diffs.close)
            repo = self._quick.repo()
            one = None if repo is None else functools.partial(path_tree, repo.objects)
            self._patch_cache = PatchCache(diffs.diff, one)
        return self._patch_cache

    def numstat(self, base: str | None = None) -> list[tuple[str, int | None, int | None]]:
        """``(path, added, removed)`` per changed file against ``base``; None for binary."""
        start = self.tree_of(base) if base else self.base()
        out = self.git.run(
            "diff-tree", "-r", "-z", "--no-renames", "--text", "--numstat", start, self.snapshot()
        )
        rows: list[tuple[str, int | None, int | None]] = []
        for field in out.split("\0"):
            parts = field.split("\t", 2)
            if len(parts) == 3:
                added, removed, path = parts
                rows.append((path, _int_or_none(added), _int_or_none(removed)))
        return rows

    def changed_files(self, base: str | None = None) -> list[str]:
        return self._diff_against(base)[1]

    # -- commits and worktrees ----------------------------------------------------------

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
        head = self.git.head()
        now = self.snapshot()
        tree = now if only is None else self._tree_with(head, now, only)
        parents = ["-p", head] if head else []
        env = self._user_identity()
        commit = self.git.run("commit-tree", tree, *parents, "-m", message, env=env).strip()
        self.git.run("update-ref", "-m", f"looprun: {message}", "HEAD", commit, head or "")
        self.touched()  # HEAD moved
        self.reset_index(only)
        return commit

    def reset_index(self, only: Sequence[str] | None) -> None:
        """The user's index entries of ``only`` (all with None) set to HEAD's."""
        if only is None:
            self.git.run("reset", "-q")
        elif only:
            data = b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in only)
            self.git.run(
                "reset",
                "-q",
                "--pathspec-from-file=-",
                "--pathspec-file-nul",
                "HEAD",
                env={"GIT_LITERAL_PATHSPECS": "1"},
                input=data,
            )

    def made_commit(self, parent: str, run_id: str) -> str | None:
        """HEAD, when it is run ``run_id``'s ``--commit`` commit on top of ``parent`` (made
        before a crash): its first parent is ``parent`` and its message carries the
        ``Looprun-Run: <run_id>`` trailer; else None."""
        head = self.git.head()
        if head is None or head == parent:
            return None
        parents, _, body = self.git.run("log", "-1", "--format=%P%n%B", head).partition("\n")
        if (parents.split() or [""])[0] != parent:
            return None
        trailer = f"Looprun-Run: {run_id}"
        return head if any(ln.strip() == trailer for ln in body.splitlines()) else None

    def _tree_with(self, head: str | None, source: str, paths: Sequence[str]) -> str:
        """HEAD's tree with ``paths`` taken from tree ``source`` (absent there: removed)."""
        with self._temp_index() as env:
            if head:
                self.git.run("read-tree", head, env=env)
            present = self.git.run("ls-tree", "-r", "-z", "--full-tree", source)
            wanted = set(paths)
            entries = {
                rec.split("\t", 1)[1]: rec
                for rec in present.split("\0")
                if "\t" in rec and rec.split("\t", 1)[1] in wanted
            }
            zero = "0" * len(source)
            lines = [entries.get(p, f"0 blob {zero}\t{p}") for p in paths]
            data = b"".join(ln.encode("utf-8", "surrogateescape") + b"\0" for ln in lines)
            self.git.run("update-index", "-z", "--index-info", env=env, input=data)
            return self.git.run("write-tree", env=env).strip()

    def _user_identity(self) -> dict[str, str]:
        env: dict[str, str] = {}
        name = self.git.run("config", "user.name", check=False).strip()
        email = self.git.run("config", "user.email", check=False).strip()
        if name:
            env["GIT_AUTHOR_NAME"] = env["GIT_COMMITTER_NAME"] = name
        if email:
            env["GIT_AUTHOR_EMAIL"] = env["GIT_COMMITTER_EMAIL"] = email
        return env

    def add_worktree(self, path: Path, branch: str, start: str) -> Workspace:
        """A git worktree at ``path`` on a new private branch from commit ``start``."""
        commit = self.git.run("rev-parse", "--verify", "-q", f"{start}^{{commit}}", check=False)
        if not commit.strip():
            commit = self.git.run(
                "rev-parse", "--verify", "-q", f"{REF_PREFIX}{start}^{{commit}}", check=False
            )
        if not commit.strip():
            raise LooprunError(f"no such commit to start a worktree from: {start}")
        path = Path(os.path.abspath(path))
        add = ("worktree", "add", "-q", "-b", branch, str(path), commit.strip())
        # test-only: what a kill in the middle of `git worktree add` leaves (the branch
        # made, the worktree registered but still locked, nothing checked out)
        crash_point(
            "worktree.half-made",
            lambda: self.git.run(*add[:3], "--lock", "--no-checkout", *add[3:]),
        )
        self.git.run(*add)
        sub = Workspace.open(path, state_dir=path / ".looprun")
        sub._base = sub.tree_of(commit.strip())
        return sub

    def ensure_worktree(self, path: Path, branch: str, start: str) -> bool:
        """The worktree at ``path`` on ``branch``, made from ``start`` unless a sound one
        is there already (a resumed sub-loop's). What a crash left half-made (a worktree
        git still marks locked while initializing, a directory git does not know, a
        branch without its worktree) is removed and made again; True when that
        happened. The sub-loop's own state restores its content."""
        path = Path(os.path.abspath(path))
        entry = self._worktree_entry(path)
        if entry is not None and "locked" not in entry and (path / ".git").exists():
            return False
        leftovers = entry is not None or path.exists() or self._has_branch(branch)
        self.discard_worktree(path, branch)
        self.add_worktree(path, branch, start)
        return leftovers

    def discard_worktree(self, path: Path, branch: str | None) -> None:
        """Remove the worktree at ``path`` and its ``branch``, whatever state a crash left
        them in (half made, half removed, or gone already)."""
        path = Path(os.path.abspath(path))
        if self._worktree_entry(path) is not None:
            self.git.run("worktree", "unlock", str(path), check=False)
            self.git.run("worktree", "remove", "--force", "--force", str(path), check=False)
        if path.exists():
            shutil.rmtree(path, ignore_errors=True)
        self.git.run("worktree", "prune")
        crash_point("worktree.removed")
        if branch and self._has_branch(branch):
            self.delete_branch(branch)

    def _worktree_entry(self, path: Path) -> dict[str, str] | None:
        """``git worktree list`` 's record of the worktree at ``path`` (None: unknown)."""
        out = self.git.run("worktree", "list", "--porcelain", "-z")
        for block in out.split("\0\0"):
            entry: dict[str, str] = {}
            for field in block.split("\0"):
                key, _, value = field.partition(" ")
                if key:
                    entry[key] = value
            wt = entry.get("worktree")
            if wt and os.path.realpath(wt) == os.path.realpath(path):
                return entry
        return None

    def _has_branch(self, branch: str) -> bool:
        ref = f"refs/heads/{branch}"
        return bool(self.git.run("rev-parse", "--verify", "-q", ref, check=False).strip())

    def remove_worktree(self, path: Path) -> None:
        self.git.run("worktree", "remove", "--force", str(Path(os.path.abspath(path))))
        self.git.run("worktree", "prune")

    def keep_branch(self, worktree: Path, branch: str, commit: str) -> None:
        """Point the worktree's branch at ``commit`` (its last state) and reset the
        worktree's index to it, so failed work stays inspectable on the branch."""
        git = Git(Path(os.path.abspath(worktree)))
        git.run("update-ref", f"refs/heads/{branch}", commit)
        git.run("reset", "-q")

    def delete_branch(self, branch: str) -> None:
        """Delete a private branch made for a worktree (never the current branch)."""
        self.git.run("branch", "-D", "-q", branch)

    def merge_from(self, other_commit: str, base_commit: str) -> MergeResult:
        """Apply the changes ``other_commit`` made relative to ``base_commit`` onto this
        working tree, three-way. On conflict nothing changes and the paths are reported.
        """
        base_tree = self.tree_of(base_commit)
        other_tree = self.tree_of(other_commit)
        ours_tree = self.snapshot()
        if other_tree == base_tree:
            return MergeResult(True, tree=ours_tree)
        base = self.git.run("commit-tree", base_tree, "-m", "looprun merge base").strip()
        ours = self.git.run("commit-tree", ours_tree, "-p", base, "-m", "ours").strip()
        theirs = self.git.run("commit-tree", other_tree, "-p", base, "-m", "theirs").strip()
        code, out, err = self.git.run_status(
            "merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", ours, theirs
        )
        fields = [f for f in out.split("\0") if f]
        if code == 1:
            return MergeResult(False, conflicts=tuple(dict.fromkeys(fields[1:])))
        if code != 0 or not fields:
            raise GitError(f"git merge-tree failed in {self.workdir}: {err.strip()}")
        merged = fields[0]
        changed = self._apply(ours_tree, merged)
        self.touched()
        return MergeResult(True, tree=merged, changed=tuple(changed))

    # -- crash recovery ----------------------------------------------------------------

    def clear_stale_locks(self, run_id: str, *, grace_s: float = LOCK_GRACE_S) -> list[Path]:
        """Remove the lock files a killed run left behind, so the tree is not blocked.

        Call only while holding the run lock (:class:`RunLock`): holding it proves that
        the run which took these locks is dead. Only the engine's own locks are touched:
        the private index's, this run's private refs' and branches', and the index of a
        worktree made for one of its sub-loops; never the user's index or branches. A
        lock younger than ``grace_s`` gets that long to go away (a git command whose
        parent was killed alone finishes on its own)."""
        found = [self.state_dir / "snapshot.index.lock"]
        common = self._git_path(self.git.run("rev-parse", "--git-common-dir").strip())
        own = self._git_path(self.git.run("rev-parse", "--git-dir").strip())
        if own != common and own.parent.name == "worktrees":  # a sub-loop's worktree
            found.append(own / "index.lock")
        rid = glob.escape(run_id)
        found.extend((common / REF_PREFIX / "base").glob("*.lock"))  # same name, same value
        for ns in (REF_PREFIX, "refs/heads/looprun/"):
            for pattern in (f"{rid}/**/*.lock", f"{rid}.*/**/*.lock"):
                found.extend((common / ns).glob(pattern))
        return [p for p in dict.fromkeys(found) if _remove_stale(p, grace_s)]

    def _git_path(self, text: str) -> Path:
        return Path(os.path.realpath(text if os.path.isabs(text) else self.workdir / text))

    # -- setup -------------------------------------------------------------------------

    def _state_rel(self) -> str:
        try:
            return Path(os.path.relpath(self.state_dir, self.workdir)).as_posix()
        except ValueError:
            return ".looprun"

    def _exclude_state_dir(self) -> None:
        """``.looprun/`` in info/exclude: local to this clone, never committed."""
        rel = self.git.run("rev-parse", "--git-path", "info/exclude").strip()
        exclude = Path(rel) if os.path.isabs(rel) else self.workdir / rel
        line = "/" + self._state_rel().strip("/") + "/"
        if line.startswith("/.."):
            return  # the state directory is outside the work tree
        try:
            existing = exclude.read_text("utf-8").splitlines()
        except FileNotFoundError:
            existing = []
        if line in existing:
            return
        exclude.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        with open(os.open(exclude, flags, 0o644), "a", encoding="utf-8") as fh:
            prefix = "" if not existing or exclude.read_text("utf-8").endswith("\n") else "\n"
            fh.write(f"{prefix}{line}\n")


def _int_or_none(text: str) -> int | None:
    return int(text) if text.isdigit() else None


class RunLock:
    """One run at a time per working tree: two runs would roll back each other's edits
    and race on the private index. An advisory ``flock`` on ``<state_dir>/lock``, so a
    killed run (even ``kill -9``) never leaves a stale lock behind."""

    def __init__(self, state_dir: Path, run_id: str):
        self.path = Path(state_dir) / "lock"
        self.run_id = run_id
        self._fh: Any = None

    def __enter__(self) -> RunLock:
        safefs.checked_dir(self.path.parent)
        fd = safefs.open_file(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        fh = open(fd, "r+", encoding="utf-8")
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            holder = fh.read().strip() or "another run"
            fh.close()
            raise LooprunError(
                f"{holder} is still running in {self.path.parent.parent}; one run at a "
                "time per working tree - wait for it, or run in a separate clone or "
                "`git worktree` (--workdir)"
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"run {self.run_id} (pid {os.getpid()})\n")
        fh.flush()
        self._fh = fh
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fh is not None:
            self._fh.close()  # closing releases the flock
            self._fh = None


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


def _remove_stale(lock: Path, grace_s: float) -> bool:
    """Remove ``lock`` once it is ``grace_s`` old; False if it was not there."""
    try:
        age = time.time() - lock.stat().st_mtime
    except FileNotFoundError:
        return False
    if age < grace_s:
        time.sleep(grace_s - age)
    try:
        lock.unlink()
    except FileNotFoundError:
        return False
    return True


def _prune_empty_dirs(directory: Path, root: Path) -> None:
    while directory != root and root in directory.parents:
        try:
            directory.rmdir()
        except OSError:
            return
        directory = directory.parent
