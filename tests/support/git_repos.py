"""Real git repositories for tests: a directory with everything in it committed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def git_repo(path: Path) -> Path:
    """A real repository at ``path`` with everything in it committed (an empty directory
    gets an empty first commit), under a fixed test identity."""
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
    }
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q"], cwd=path, check=True)
    subprocess.run(["git", "add", "-A"], cwd=path, check=True)
    subprocess.run(
        ["git", "commit", "-qm", "start", "--allow-empty"], cwd=path, check=True, env=env
    )
    return path
