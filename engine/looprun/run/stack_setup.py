"""The inputs a stack's adapter reads from the repository before a run starts (its
``setup`` hook: which test runner the scripts use, whether a type check can run), added to
the run's ``--set`` values so run.json records them and a resume or a sub-loop reuses them.

The adapter reads files as the run's base will hold them: the base is HEAD plus what is
uncommitted when the run starts, so a file unchanged since HEAD is read from git's objects,
one changed or untracked from the disk as it is now (before any model call), and an
untracked ignored one is absent. Nothing is written: a refusal leaves the repository as it
was.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from looprun.checks import stacks
from looprun.checks.stacks.base import SetupInput
from looprun.template.model import Template
from looprun.workspace.git import Git, GitError


def with_stack_settings(
    template: Template, workdir: Path, sets: Mapping[str, Any], say: Callable[[str], None]
) -> tuple[dict[str, Any], dict[str, str]]:
    """``sets`` plus the inputs the template's stacks chose (what the user set wins), and
    those inputs alone (recorded as the run's ``stack_inputs``: its sub-loops compose the
    same pack and get them too); each choice said on ``say``. UsageError when a stack
    leaves the choice to the user."""
    used = sorted({spec.stack for spec in template.observe.values() if spec.stack})
    out = dict(sets)
    chosen: dict[str, str] = {}
    for name in used:
        setup = stacks.get(name).setup
        if setup is None:
            continue
        files = BaseFiles(workdir)
        files.prefetch(stacks.get(name).setup_reads)
        at = SetupInput(
            read=files.read,
            workdir=workdir,
            given={k: str(v) for k, v in sets.items()},
            declared=frozenset(template.inputs),
        )
        for setting in setup(at):
            if setting.value is None:
                say(f"{setting.name}: {setting.why}")
                continue
            chosen[setting.name] = setting.value
            if setting.name not in sets:
                out[setting.name] = setting.value
                say(f"{setting.name}: {setting.value} ({setting.why})")
    return out, chosen


class BaseFiles:
    """Root-relative files as the run's base will hold them, read without writing."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self._git: Git | None = None
        self._looked = False
        self._read: dict[str, bytes | None] = {}  # what was read already, by path

    def _repo(self) -> Git | None:
        if not self._looked:
            self._looked = True
            try:
                top, pinned = Git(self.workdir).located()
            except GitError:
                top, pinned = "", None
            if (
                top
                and pinned is not None
                and os.path.realpath(top) == os.path.realpath(self.workdir)
            ):
                self._git = pinned
        return self._git

    def prefetch(self, paths: Sequence[str]) -> None:
        """Read ``paths`` together: one ``git status`` and one object batch for them all,
        where reading each on its own asks git three or four times per file."""
        git = self._repo()
        wanted = [p for p in dict.fromkeys(paths) if p not in self._read and "\n" not in p]
        if git is None or not wanted:
            return
        status = git.run_bytes(
            *("status", "--porcelain", "-z", "--no-renames", "--ignored"),
            *("--untracked-files=all", "--"),
            *(f":(literal){p}" for p in wanted),
            env={"GIT_OPTIONAL_LOCKS": "0"},
        )
        seen: dict[str, bytes] = {}  # each path's first status record, as read() takes it
        for record in status.split(b"\0"):
            if len(record) > 3:
                seen.setdefault(record[3:].decode("utf-8", "surrogateescape"), record[:2])
        head = git.head()
        clean = [p for p in wanted if p not in seen]
        blobs = git.objects_or_none([f"{head}:{p}" for p in clean]) if head and clean else []
        for path, got in zip(clean, blobs, strict=True):
            self._read[path] = got[1] if got is not None and got[0] == "blob" else None
        for path in wanted:
            if path in seen:
                self._read[path] = None if seen[path] == b"!!" else _bytes(self.workdir / path)
            elif head is None:
                self._read[path] = None

    def read(self, path: str) -> bytes | None:
        if path in self._read:
            return self._read[path]
        git = self._repo()
        disk = self.workdir / path
        if git is None:  # no repository yet: the run's base is the directory as it is
            return _bytes(disk)
        # GIT_OPTIONAL_LOCKS=0: status does not refresh (write) the user's index
        status = git.run_bytes(
            "status",
            "--porcelain",
            "-z",
            "--ignored",
            "--untracked-files=all",
            "--",
            path,
            env={"GIT_OPTIONAL_LOCKS": "0"},
        )
        if not status:  # tracked and unchanged (or absent): HEAD's blob is the base's
            if git.head() is None:
                return None
            entry = git.run_bytes("ls-tree", "-z", "HEAD", "--", path)
            meta = entry.split(b"\t", 1)[0].split()
            if len(meta) != 3 or meta[1] != b"blob":
                return None
            return git.run_bytes("cat-file", "blob", meta[2].decode())
        if status.startswith(b"!!"):
            return None  # ignored and untracked: never part of a snapshot
        return _bytes(disk)


def _bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes() if path.is_file() and not path.is_symlink() else None
    except OSError:
        return None
