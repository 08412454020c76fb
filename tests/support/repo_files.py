"""The repository's own files of a kind, as git sees them: tracked or new, never ignored
(a virtualenv, node_modules or build output beside the checkout is not the project's)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def repo_files(pattern: str) -> list[Path]:
    """Every file matching the pathspec ``pattern`` that git tracks or would add, sorted."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", pattern],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    names = {n.decode("utf-8", "surrogateescape") for n in out.split(b"\0") if n}
    return sorted(ROOT / n for n in names if (ROOT / n).is_file())
