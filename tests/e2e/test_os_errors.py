"""An operating-system failure is a one-line message and exit 1, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_a_file_where_the_state_directory_goes_is_a_clear_error(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "setup.py").write_text("")  # a Python repository: its stack is known
    for args in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "start"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@localhost", *args],
            cwd=repo,
            check=True,
        )
    (repo / ".looprun").write_text("not a directory\n")
    script = tmp_path / "script.yaml"
    script.write_text("- text: nothing to do\n")
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "looprun", "bugfix", "--intent", "x"),
            *("--workdir", str(repo), "--model", f"script:{script}"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    (line,) = [x for x in proc.stderr.strip().splitlines() if not x.startswith("stack: ")]
    assert line.startswith(f"looprun: {repo / '.looprun'}: is not a directory;"), line
    assert (repo / ".looprun").read_text() == "not a directory\n"  # nothing of the user's lost
