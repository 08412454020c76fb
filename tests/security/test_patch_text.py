"""The engine reads a patch as git wrote it, and as Python will run the file.

git ends a patch line at ``\\n`` only, and Python ends a source line at a lone CR too:
code after a CR must be checked like any added line, and a file whose name git quotes
must not drop out of the checks. Real runs of the CLI with a scripted model.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from tests.support.cli import scripted_json_run
from tests.support.git_repos import git_repo

TEMPLATE = """\
looprun: 1
name: t
plan: {mode: none}
act:
  prompt: go
  tools: [write_file]
  constraints:
    paths: {allow: ["**"]}
    forbidden_patterns: %(policy)s
observe:
  diff: {parser: git_diff, options: {forbidden_patterns: %(observer)s}}
exit: [%(exit)s]
refine:
  - if: policy.violations > 0
    then: {abort: "{{ policy.summary }}"}
  - else: {abort: "{{ diff.feedback }} files={{ diff.files | join(',') }}"}
limits: {max_iterations: 1}
"""
HIDDEN = "import os\nx = 1\ros.system('echo pwned')\n"


def _run(
    tmp_path: Path, path: str, content: str, *, policy: str, observer: str, exit: str
) -> dict[str, Any]:
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "src" / "app.py").write_text("x = 1\n")
    git_repo(work)
    text = TEMPLATE % {"policy": policy, "observer": observer, "exit": exit}
    call = {"name": "write_file", "arguments": {"path": path, "content": content}}
    turns = [{"text": "working", "tool_calls": [call]}, {"text": "ok"}]
    return scripted_json_run(tmp_path, work, text, turns)[1]


def test_the_file_really_runs_the_code_after_the_cr(tmp_path: Path) -> None:
    """The premise: Python runs a statement that follows a lone CR."""
    script = tmp_path / "hidden.py"
    script.write_bytes(b"import sys\nx = 1\rsys.exit(7)\n")
    assert subprocess.run(["python3", str(script)], check=False).returncode == 7


def test_a_forbidden_pattern_after_a_lone_cr_is_refused_by_the_policy(tmp_path: Path) -> None:
    summary = _run(
        tmp_path, "src/app.py", HIDDEN, policy='["re:^os\\\\.system\\\\("]', observer="[]",
        exit="policy.violations == 0",
    )  # fmt: skip
    assert summary["outcome"] == "aborted", summary
    assert "forbidden pattern" in summary["reason"] and "src/app.py:2" in summary["reason"], summary


def test_the_git_diff_observer_finds_it_too_in_a_file_git_quotes(tmp_path: Path) -> None:
    name = 'src/we"ird\tname.py'
    summary = _run(
        tmp_path, name, HIDDEN, policy="[]", observer='["os.system("]',
        exit="diff.ok",
    )  # fmt: skip
    assert summary["outcome"] == "aborted", summary
    assert "forbidden pattern 'os.system('" in summary["reason"], summary
    assert f"{name}:2" in summary["reason"], summary
    assert "\r" not in summary["reason"], "a CR shown raw would hide the line on a terminal"


def test_a_quoted_name_is_in_diff_files_and_its_lines_are_checked(tmp_path: Path) -> None:
    name = "src/tab\there.py"
    summary = _run(
        tmp_path, name, "breakpoint()\n", policy="[]", observer='["breakpoint()"]',
        exit="diff.ok",
    )  # fmt: skip
    assert summary["outcome"] == "aborted", summary
    assert f"{name}:1" in summary["reason"], summary
    assert summary["reason"].endswith(f"files={name}"), summary
