"""The git_diff observer's command: git, asked here about the working tree against the
run's base, so that the parser (``observe.git_diff``) stays a pure function of its output.

The working tree is snapshotted through a private index (``Git.snapshot``), so the
user's index and branch are never touched, and untracked files count as changes.
"""

from __future__ import annotations

import dataclasses
import re

from looprun.observe.base import ParseInput
from looprun.observe.git_diff import GitOutput, forbidden_matchers
from looprun.workspace.git import EMPTY_TREE, Git, GitError
from looprun.workspace.ignore import base_ignore_rules


def with_git_output(data: ParseInput) -> ParseInput:
    """``data`` with what git says about its workdir, or why git could not say it. A bad
    forbidden pattern asks nothing: the parser reports it before it reads git's output."""
    try:
        patterns = forbidden_matchers(data)
    except re.error:
        return data
    return dataclasses.replace(data, git_output=_ask_git(data, patch=bool(patterns)))


def _ask_git(data: ParseInput, *, patch: bool) -> GitOutput:
    git = Git(data.workdir, data.git_dir)
    try:
        if not git.is_repo():
            return GitOutput(error=f"{data.workdir} is not a git repository (git_diff needs one)")
        base = data.base or git.head() or EMPTY_TREE
        target = git.snapshot(rules=base_ignore_rules(git, base), also=data.exclude)
        return GitOutput(
            numstat=git.diff(base, target, "--numstat", "-z"),
            status=git.diff(base, target, "--name-status", "-z"),
            patch=git.diff(base, target, "-U0") if patch else "",
        )
    except GitError as exc:
        return GitOutput(error=str(exc))
    except OSError as exc:
        return GitOutput(error=f"{data.workdir}: cannot run git: {exc}")
