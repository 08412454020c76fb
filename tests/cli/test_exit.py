"""The ``looprun`` command ends without the interpreter's teardown, yet as ``sys.exit``
would: its exit code, its output flushed, its exit handlers run. Checked in fresh
interpreters running the console script's entry point."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.git_repos import git_repo

# a process that calls the command's entry point, with an object freed only by teardown
# and an exit handler, each of which says when it runs
SHIM = """
import atexit, os, sys
class Freed:
    def __del__(self):
        os.write(2, b"teardown\\n")
kept = Freed()
atexit.register(lambda: os.write(2, b"exit handler\\n"))
sys.argv = ["looprun", *sys.argv[1:]]
from looprun.cli.main import entry
entry()
"""


def _looprun(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SHIM, *args], capture_output=True, text=True, cwd=cwd, timeout=60
    )


def test_the_command_skips_the_teardown_but_not_the_exit_handlers(tmp_path: Path) -> None:
    proc = _looprun("--version", cwd=tmp_path)
    assert proc.returncode == 0
    assert "looprun" in proc.stdout  # flushed although the process ended at once
    assert "exit handler" in proc.stderr
    assert "teardown" not in proc.stderr


def test_an_error_keeps_its_exit_code_and_message(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("looprun: 1\nname: [\n", encoding="utf-8")
    proc = _looprun("validate", "bad.yaml", cwd=tmp_path)
    assert proc.returncode == 2
    assert "bad.yaml" in proc.stdout + proc.stderr
    assert "exit handler" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_usage_error_keeps_click_s_exit_code(tmp_path: Path) -> None:
    proc = _looprun("--no-such-option", cwd=tmp_path)
    assert proc.returncode == 2
    assert "no-such-option" in proc.stderr


def test_a_run_leaves_no_temporary_files(tmp_path: Path) -> None:
    """What a run puts in the temporary directory is gone when the command has ended."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "app.py").write_text("x = 1\n", encoding="utf-8")
    git_repo(repo)
    script = tmp_path / "script.json"
    script.write_text(
        '[{"tool_calls": [{"name": "write_file", "arguments": {"path": "n.txt", '
        '"content": "hi\\n"}}]}, {"text": "ok"}]',
        encoding="utf-8",
    )
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    env |= {"TMPDIR": str(tmp), "LOOPRUN_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run(
        [
            *(sys.executable, "-c", SHIM, "--until", "true", "--intent", "a note"),
            *("--workdir", str(repo), "--model", f"script:{script}", "--json"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert '"outcome": "done"' in proc.stdout
    assert list(tmp.iterdir()) == []
