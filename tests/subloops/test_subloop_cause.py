"""A sub-loop whose checks cannot run stops the outer loop with that cause, through the
real CLI: the outer loop does not replan around a program that is missing (no plan can
make it appear), and the cause is not hidden behind what the outer loop does next."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from subloop_templates import edit_turns
from tests.support.cli import looprun, scripted_run
from tests.support.git_repos import git_repo

INNER = """\
looprun: 1
name: checked_edit
inputs:
  intent: {type: string, required: true}
plan: {mode: none}
act:
  prompt: "{{ intent }}"
  tools: [write_file]
observe:
  tests:
    run: "no-such-checker-7f3a --quick"
    parser: exit_code
exit: [tests.ok]
limits: {max_iterations: 2}
"""

OUTER = """\
looprun: 1
name: replanning
inputs:
  intent: {type: string, required: true}
plan:
  mode: static
  tasks:
    - {id: only, goal: "write the file"}
each_task:
  uses: ./checked_edit.yaml
  with: {intent: "{{ task.goal }}"}
  isolation: worktree
exit: ["subloops.all_done"]
refine:
  - if: subloops.failed
    then: {replan: "try again"}
limits: {max_iterations: 3}
"""


def test_a_sub_loop_that_cannot_run_its_checks_stops_the_outer_loop_with_that_cause(
    tmp_path: Path,
) -> None:
    work = git_repo(tmp_path / "proj")
    tpl = tmp_path / "tpl"
    tpl.mkdir()
    (tpl / "checked_edit.yaml").write_text(INNER)
    (tpl / "replanning.yaml").write_text(OUTER)
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"tasks": {"only": edit_turns("out.txt", "x\n")}}))
    args = scripted_run(str(tpl / "replanning.yaml"), intent="go", workdir=work, script=script)
    proc = looprun(*args, "--json", cwd=work)
    assert proc.returncode == 1, proc.stderr
    summary = json.loads(proc.stdout)
    assert (summary["outcome"], summary["code"]) == ("error", "observer_cannot_run")
    assert summary["iterations"] == 1  # no replan around it
    assert summary["reason"].startswith("sub-loop only: observer 'tests' cannot run")
    assert "no-such-checker-7f3a" in summary["reason"]
