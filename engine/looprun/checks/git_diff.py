"""The git_diff observer's command: git, asked here about the working tree against the
run's base, so that the parser (``observe.git_diff``) stays a pure function of its output.

The working tree is snapshotted through a private index (``Git.snapshot``), so the
user's index and branch are never touched, and untracked files count as changes.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

from looprun.observe.base import ParseInput
from looprun.observe.git_diff import GitOutput, forbidden_matchers
from looprun.workspace.git import EMPTY_TREE, Git, GitError
from looprun.workspace.ignore import base_ignore_rules

# the tree of the working tree now, when judged by the ignore rules of this base; else None
Snapshot = Callable[[str], str | None]


def with_git_output(data: ParseInput, snapshot: Snapshot | None = None) -> ParseInput:
    """``data`` with what git says about its workdir, or why git could not say it. A bad
    forbidden pattern asks nothing: the parser reports it before it reads git's output.
    ``snapshot``: the run's own snapshot of the tree now, judged against a base (None
    when it judges by another base): the tree is then not snapshotted a second time."""
    try:
        patterns = forbidden_matchers(data)
    except re.error:
        return data
    return dataclasses.replace(data, git_output=_ask_git(data, snapshot, patch=bool(patterns)))


def _ask_git(data: ParseInput, snapshot: Snapshot | None, *, patch: bool) -> GitOutput:
    git = Git(data.workdir, data.git_dir)
    try:
        # a pinned repository (a run's) was found to be one; a directory given is asked
        if data.git_dir is None and not git.is_repo():
            return GitOutput(error=f"{data.workdir} is not a git repository (git_diff needs one)")
        base = data.base or git.head() or EMPTY_TREE
        target = snapshot(base) if snapshot is not None else None
        if target is None:
            target = git.snapshot(rules=base_ignore_rules(git, base), also=data.exclude)
        if target == base:  # the same tree: nothing changed, nothing to ask
            return GitOutput()
        numstat, status = _split_raw(git.diff(base, target, "--raw", "--numstat", "-z"))
        return GitOutput(
            numstat=numstat,
            status=status,
            patch=git.diff(base, target, "-U0") if patch else "",
        )
    except GitError as exc:
        return GitOutput(error=str(exc))
    except OSError as exc:
        return GitOutput(error=f"{data.workdir}: cannot run git: {exc}")


def _split_raw(out: str) -> tuple[str, str]:
    """``--raw --numstat -z`` (one git process) as ``--numstat -z`` and ``--name-status
    -z`` would print them: the raw records come first, each ``:modes ids STATUS`` then
    its path (no renames), then the numstat records."""
    fields = out.split("\0")
    status: list[str] = []
    i = 0
    while i + 1 < len(fields) and fields[i].startswith(":"):
        status += [fields[i].rsplit(" ", 1)[-1], fields[i + 1]]
        i += 2
    numstat = "\0".join(fields[i:])
    return numstat, "".join(f + "\0" for f in status)
