"""A ``done_when`` written by a model planner cannot exhaust memory.

The CLI runs with its address space capped (as a container would cap it), so an
expression that tries to build gigabytes fails the old way (a MemoryError) instead of
taking the machine down; the engine must refuse it first, as a plan error or a clear
evaluation error, and end the run with a proper outcome.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tests.support.cli import cli_env
from tests.support.git_repos import git_repo

TEMPLATE = """\
looprun: 1
name: t
plan: {mode: model, prompt: "plan {{ intent }}"}
act: {prompt: "{{ task.goal }}", tools: [write_file]}
observe:
  d: {parser: git_diff}
exit: [d.ok]
refine:
  - else: {retry: again}
limits: {max_iterations: 2}
"""
CAP = 1_500_000_000


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))


def _plan(done_when: str) -> dict[str, str]:
    return {"text": json.dumps({"tasks": [{"id": "t1", "goal": "g", "done_when": done_when}]})}


def _run(tmp_path: Path, turns: list[dict[str, str]]) -> tuple[int, dict, str]:
    work = git_repo(tmp_path / "work")
    (tmp_path / "t.yaml").write_text(TEMPLATE)
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump(turns))
    proc = subprocess.run(
        [sys.executable, "-m", "looprun", str(tmp_path / "t.yaml"), "--intent", "x",
         "--workdir", str(work), "--model", f"script:{script}", "--json"],
        capture_output=True, text=True, env=cli_env(), timeout=120, preexec_fn=_capped,
    )  # fmt: skip
    assert "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout), proc.stderr


FORMATTING = ["'%02000000000d' % 1 == ''", "('%' ~ '02000000000d') % 1 == ''"]


@pytest.mark.parametrize("done_when", FORMATTING)
def test_percent_formatting_is_a_plan_error(tmp_path: Path, done_when: str) -> None:
    code, summary, stderr = _run(tmp_path, [_plan(done_when), _plan(done_when)])
    assert code == 1 and summary["code"] == "plan_invalid", (summary, stderr)
    assert "% operator" in summary["reason"], summary


BUILDERS = [
    "(['a' * 200000] * 10000) | join | length > 0",
    "(['ab' * 100000] * 10000) | map('upper') | list | length > 0",
    "(['a' * 200000] * 10000) | string | length > 0",
    "((['a' * 200000] * 5000) + (['b' * 200000] * 5000)) | join | length > 0",
]


@pytest.mark.parametrize("done_when", BUILDERS)
def test_repetition_and_joins_are_held_to_a_budget(tmp_path: Path, done_when: str) -> None:
    code, summary, stderr = _run(tmp_path, [_plan(done_when), {"text": "nothing"}])
    assert code == 1 and summary["outcome"] == "error", (summary, stderr)
    assert "may not build values over" in summary["reason"], summary
