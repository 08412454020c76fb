"""Budgets bound a single call: the output of each request is capped by the tokens left,
a request the budget cannot pay for is not sent, and an outer ``max_tokens`` bounds the
sum of its sub-loops' usage (the real CLI, scripted models, real git worktrees)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from tests.support.cli import looprun, scripted_run
from tests.support.git_repos import git_repo

INNER = """\
looprun: 1
name: grind
inputs:
  intent: {type: string, required: true}
plan: {mode: none}
act:
  prompt: "{{ intent }}"
  tools: [write_file]
  max_steps: 4
  constraints: {paths: {allow: ["**"]}}
observe:
  check: {run: "python3 -c 'import sys; sys.exit(1)'", parser: exit_code}
exit: [check.ok]
limits: {max_iterations: 30, max_tokens: 100000}
"""

OUTER = """\
looprun: 1
name: split
inputs:
  intent: {type: string, required: true}
plan:
  mode: static
  tasks:
    - {id: left, goal: "GOAL left"}
    - {id: right, goal: "GOAL right"}
each_task:
  uses: ./grind.yaml
  with: {intent: "{{ task.goal }}"}
  isolation: worktree
  parallel: 2
exit: ["subloops.all_done"]
refine:
  - else: {retry: "again"}
limits: {max_iterations: 3, max_tokens: CAP}
"""
CAP = 4000
# The documented slack: how far the estimate of the last request may fall short of what
# the provider then counts (here the scripted model's own count), never a whole call.
SLACK = 0.05


def _turns(name: str) -> list[dict]:
    call = {"tool_calls": [{"name": "write_file", "arguments": {"path": name, "content": "x"}}]}
    return [call, {"text": "done"}] * 40


def test_outer_max_tokens_bounds_the_sum_of_its_subloops(tmp_path: Path) -> None:
    work = tmp_path / "proj"
    work.mkdir()
    (work / "README").write_text("hi\n")
    git_repo(work)
    tpl = tmp_path / "tpl"
    tpl.mkdir()
    (tpl / "grind.yaml").write_text(INNER)
    goal = "Describe the plan in detail. " * 40  # ~300 tokens a request
    (tpl / "split.yaml").write_text(OUTER.replace("GOAL", goal).replace("CAP", str(CAP)))
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"tasks": {"left": _turns("l"), "right": _turns("r")}}))
    proc = looprun(
        *scripted_run(str(tpl / "split.yaml"), intent="go", workdir=work, script=script),
        "--json",
        cwd=work,
    )
    summary = json.loads(proc.stdout)
    assert summary["outcome"] == "exhausted", proc.stderr
    used = summary["usage"]["prompt_tokens"] + summary["usage"]["completion_tokens"]
    sub_total = sum(r["tokens"] for r in summary["subloops"])
    assert used >= sub_total > CAP // 2  # the sub-loops did spend most of the budget
    assert used <= CAP * (1 + SLACK), (used, CAP)
    # every request's output was capped by what the sub-loop's share had left
    exchanges = sorted((Path(summary["run_dir"]) / "subloops").glob("*/exchanges.jsonl"))
    assert exchanges
    for path in exchanges:
        rows = [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]
        assert rows
        # each sub-loop ran within its share: never a call after its budget ran out
        spent = sum(r["usage"]["prompt_tokens"] + r["usage"]["completion_tokens"] for r in rows)
        assert spent <= (CAP // 2) * (1 + SLACK), (path, spent)
