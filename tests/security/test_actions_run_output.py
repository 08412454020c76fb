"""Under GitHub Actions the runner reads every output line that starts with ``::`` as a
workflow command. A real pytest test whose id and failure message carry newlines and
workflow commands, a model that names a file with a newline and a command in it, and a
source line that is a command (the report's diff shows it as context) run through
``looprun run``, ``resume`` and ``report``: none of what they print starts a command."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.report.runs import TEMPLATE
from tests.support.cli import cli_env
from tests.support.git_repos import git_repo

HOSTILE_TEST = """\
import pytest


@pytest.mark.parametrize("case", [1], ids=["::error::id-owned"])
def test_add(case):
    assert False, "boom\\n::error::owned\\n::stop-commands::tok\\r::add-mask::x\\n  ::warning::y"
"""


SCRIPT = """\
- text: "thinking\\n::error::model-text"
  tool_calls:
    - name: edit_file
      arguments: {path: src/calc.py, old: "a - b", new: "a * b"}
    - name: write_file
      arguments: {path: "src/x\\n::error::file-name.py", content: "y"}
- text: "Fixed.\\n::error::model-said"
"""


def _looprun(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "looprun", *args],
        cwd=cwd,
        env=cli_env({"GITHUB_ACTIONS": "true"}),
        capture_output=True,
        timeout=120,
    )  # bytes: a CR must be seen as the runner sees it


def _commands(proc: subprocess.CompletedProcess[bytes]) -> list[str]:
    text = proc.stdout.decode() + "\n" + proc.stderr.decode()
    return [ln for ln in re.split(r"\r\n|\r|\n", text) if ln.lstrip().startswith("::")]


def test_no_line_of_a_run_starts_a_workflow_command(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "tests").mkdir()
    calc = 'def add(a, b):\n    return a - b\n"""\n::stop-commands::diff-context\n"""\n'
    (repo / "src" / "calc.py").write_text(calc)
    (repo / "tests" / "test_calc.py").write_text(HOSTILE_TEST)
    git_repo(repo)
    (tmp_path / "t.yaml").write_text(TEMPLATE.replace("max_iterations: 4", "max_iterations: 1"))
    (tmp_path / "script.yaml").write_text(SCRIPT)
    run = _looprun(
        str(tmp_path / "t.yaml"), "--intent", "add() subtracts",
        "--model", f"script:{tmp_path / 'script.yaml'}", cwd=repo,
    )  # fmt: skip
    err = run.stderr.decode()
    assert "Traceback" not in err and "file-name" in err, err  # shown, escaped
    found = re.search(r"run (\d{8}-\d{6}-[0-9a-f]{6})", err)
    assert found, err
    report = _looprun("report", found.group(1), cwd=repo)
    assert report.returncode == 0, report.stderr
    assert "diff-context" in report.stdout.decode()
    resume = _looprun("resume", found.group(1), cwd=repo)
    assert resume.returncode == 2 and "nothing to resume" in resume.stderr.decode()
    for proc in (run, report, resume):
        assert _commands(proc) == [], proc.stdout.decode() + proc.stderr.decode()
