"""Helpers for the security tests: real git repositories and the real CLI in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path


def git_repo(path: Path) -> Path:
    """A real repository at ``path`` with everything in it committed."""
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


def looprun(
    *args: str, cwd: Path, env: Mapping[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ)
    full["PATH"] = str(Path(sys.executable).parent) + os.pathsep + full.get("PATH", "")
    full.pop("LOOPRUN_MODEL", None)
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "looprun", *args],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
