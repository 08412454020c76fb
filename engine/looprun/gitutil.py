"""A thin wrapper over the git command line, shared by the workspace and the diff parser.

Snapshots use a private index file, so the user's index, branch and stash are never
touched. A work tree that is not a git repository can be given a private ``git_dir``.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from looprun.errors import LooprunError, one_line
from looprun.proc import scrubbed_env

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
# The engine's own git calls run no hooks of the user's repository (a hook would run
# repository code on every checkpoint, with the engine's environment) and never page.
_GIT_OPTIONS = (
    "-c", "core.quotepath=off",
    "-c", "core.autocrlf=false",
    "-c", f"core.hooksPath={os.devnull}",
    "-c", "core.fsmonitor=false",
)  # fmt: skip


class GitError(LooprunError):
    """A git command failed; carries the command and what git said."""


_UNKNOWN: Any = object()


class SnapshotFacts:
    """What a snapshot needs to know besides the files: HEAD, and whether the state
    directory is ignored. Asked once, then remembered until ``forget``."""

    def __init__(self) -> None:
        self._head: str | None = _UNKNOWN
        self._ignored: dict[str, bool] = {}

    def forget(self) -> None:
        self._head = _UNKNOWN
        self._ignored.clear()

    def head(self, git: Git) -> str | None:
        if self._head is _UNKNOWN:
            self._head = git.head()
        return self._head

    def ignored(self, git: Git, path: str) -> bool:
        if path not in self._ignored:
            code, _, _ = git.run_status("check-ignore", "-q", path.rstrip("/") + "/")
            self._ignored[path] = code == 0
        return self._ignored[path]


@dataclass(frozen=True)
class Git:
    """Runs git for one working tree, optionally against a private repository."""

    workdir: Path
    git_dir: Path | None = None  # a private repository for a work tree that has none

    @cached_property
    def _base_env(self) -> dict[str, str]:
        """The environment of every git call, scrubbed once per ``Git`` (it is the same
        for every call; scrubbing it each time cost more than some of the calls)."""
        env = {k: v for k, v in scrubbed_env().items() if not k.startswith("GIT_")}
        env.update(
            {
                "GIT_TERMINAL_PROMPT": "0",
                "GIT_AUTHOR_NAME": "looprun",
                "GIT_AUTHOR_EMAIL": "looprun@localhost",
                "GIT_COMMITTER_NAME": "looprun",
                "GIT_COMMITTER_EMAIL": "looprun@localhost",
                "LC_ALL": "C",
            }
        )
        if self.git_dir is not None:
            env["GIT_DIR"] = str(self.git_dir)
            env["GIT_WORK_TREE"] = str(self.workdir)
        return env

    def _env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        return {**self._base_env, **extra} if extra else self._base_env

    def run(
        self,
        *args: str,
        env: Mapping[str, str] | None = None,
        check: bool = True,
        input: bytes | None = None,
    ) -> str:
        """Run git with ``args`` in the work tree; return stdout as text."""
        code, out, err = self.run_status(*args, env=env, input=input)
        if check and code != 0:
            raise GitError(f"git {' '.join(args)} failed in {self.workdir}: {one_line(err)}")
        return out

    def run_status(
        self, *args: str, env: Mapping[str, str] | None = None, input: bytes | None = None
    ) -> tuple[int, str, str]:
        """Run git and return (exit code, stdout, stderr) for commands whose status
        carries meaning (``merge-tree`` exits 1 on conflicts)."""
        proc = subprocess.run(
            ["git", *_GIT_OPTIONS, *args],
            cwd=self.workdir,
            env=self._env(env),
            input=input,
            capture_output=True,
            check=False,
        )
        out = proc.stdout.decode("utf-8", "replace")
        return proc.returncode, out, proc.stderr.decode("utf-8", "replace")

    def is_repo(self) -> bool:
        try:
            return self.run("rev-parse", "--is-inside-work-tree").strip() == "true"
        except GitError:
            return False

    def head(self) -> str | None:
        """The commit HEAD points at, or None in a repository with no commits yet."""
        out = self.run("rev-parse", "--verify", "-q", "HEAD^{commit}", check=False).strip()
        return out or None

    def snapshot(
        self,
        index_file: Path | None = None,
        exclude: str = ".looprun",
        *,
        facts: SnapshotFacts | None = None,
    ) -> str:
        """A tree object of the working tree as it is now (tracked + untracked, not ignored).

        ``exclude`` (the engine's state directory) is never part of it. ``index_file``
        keeps a private index between calls, so git's stat cache spares re-hashing.
        ``facts`` remembers HEAD and whether ``exclude`` is ignored between calls (the
        caller forgets them when something may have changed them).
        """
        facts = facts if facts is not None else SnapshotFacts()
        if index_file is not None:
            return self._snapshot_with({"GIT_INDEX_FILE": str(index_file)}, exclude, facts)
        with tempfile.TemporaryDirectory(prefix="looprun-index-") as tmp:
            env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
            return self._snapshot_with(env, exclude, facts)

    def _snapshot_with(self, env: Mapping[str, str], exclude: str, facts: SnapshotFacts) -> str:
        # Start a new index from HEAD, so tracked files matching an ignore rule count too.
        if not os.path.exists(env["GIT_INDEX_FILE"]) and facts.head(self):
            self.run("read-tree", "HEAD", env=env)
        spec = ["."]
        # git refuses an exclude pathspec naming an ignored path; ignored is excluded anyway.
        if exclude and not exclude.startswith("..") and not facts.ignored(self, exclude):
            spec.append(f":(exclude){exclude}")
        self.run("add", "-A", "--", *spec, env=env)
        return self.run("write-tree", env=env).strip()

    def hold_index_lock(self, index_file: Path) -> subprocess.Popen[bytes]:
        """Test-only (a crash point): a real ``git add`` that holds ``index_file``'s lock
        while it waits for pathspecs on stdin, returned once the lock exists."""
        proc = subprocess.Popen(
            ["git", *_GIT_OPTIONS, "add", "--pathspec-from-file=-"],
            cwd=self.workdir,
            env=self._env({"GIT_INDEX_FILE": str(index_file)}),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        lock = Path(f"{index_file}.lock")
        for _ in range(500):
            if lock.exists() or proc.poll() is not None:
                break
            time.sleep(0.01)
        return proc

    def diff(self, base: str, target: str, *args: str) -> str:
        """``git diff`` between two tree-ish objects (no rename detection: stable output)."""
        return self.run("diff", "--no-color", "--no-renames", "--no-ext-diff", *args, base, target)
