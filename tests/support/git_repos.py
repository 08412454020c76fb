"""Real git repositories for tests: a directory with everything in it committed, and git
run under a fixed test identity."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.org",
}


def git(*args: str, cwd: Path) -> str:
    """Run git in ``cwd`` under the test identity; its output, stripped (a failure raises)."""
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **IDENTITY},
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


def git_repo(path: Path) -> Path:
    """A real repository at ``path`` with everything in it committed (an empty directory
    gets an empty first commit), under the test identity."""
    path.mkdir(parents=True, exist_ok=True)
    git("init", "-q", cwd=path)
    git("add", "-A", cwd=path)
    git("commit", "-qm", "start", "--allow-empty", cwd=path)
    return path
