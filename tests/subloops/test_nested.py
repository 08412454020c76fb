"""An outer loop whose sub-template is itself an outer loop: per-task scripts at every
level, a nested summary tree, nothing left behind; and the nesting depth limit."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml
from subloop_templates import INNER, edit_turns
from tests.support.cli import looprun, scripted_run
from tests.support.git_repos import git_repo

MID = """\
looprun: 1
name: mid
inputs:
  intent: {type: string, required: true}
plan:
  mode: static
  tasks:
    - {id: a, goal: "first part"}
    - {id: b, goal: "second part", depends_on: [a]}
each_task:
  uses: ./edit.yaml
  with: {intent: "{{ task.goal }}"}
  isolation: worktree
  parallel: 2
exit: ["subloops.all_done"]
refine:
  - if: subloops.failed
    then: {escalate: "{{ subloops.failed }} sub-loop(s) did not finish"}
  - else: {escalate: "unexpected"}
limits: {max_iterations: 1}
"""

TOP = MID.replace("name: mid", "name: top").replace("./edit.yaml", "./mid.yaml")
TOP = TOP.replace('- {id: a, goal: "first part"}', '- {id: m1, goal: "module one"}')
TOP = TOP.replace('- {id: b, goal: "second part", depends_on: [a]}', '- {id: m2, goal: "two"}')


def _git(work: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=work, capture_output=True, text=True, check=True
    ).stdout


def test_nested_outer_loops_run_merge_and_report_a_tree(tmp_path: Path) -> None:
    work = tmp_path / "proj"
    work.mkdir()
    (work / "readme.txt").write_text("hi\n")
    git_repo(work)
    head = _git(work, "rev-parse", "HEAD")
    tpl = tmp_path / "tpl"
    tpl.mkdir()
    (tpl / "edit.yaml").write_text(INNER)
    (tpl / "mid.yaml").write_text(MID)
    (tpl / "top.yaml").write_text(TOP)
    script = tmp_path / "script.yaml"
    tasks = {
        m: {"tasks": {t: edit_turns(f"{m}_{t}.txt", f"{m} {t}\n") for t in "ab"}}
        for m in ("m1", "m2")
    }
    script.write_text(yaml.safe_dump({"tasks": tasks}))
    proc = looprun(
        *scripted_run(str(tpl / "top.yaml"), intent="x", workdir=work, script=script),
        "--json",
        cwd=work,
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    for m in ("m1", "m2"):
        for t in "ab":
            assert (work / f"{m}_{t}.txt").read_text() == f"{m} {t}\n"
    # the tree, in the summary and in summary.json: task, template, outcome, iterations, tokens
    tree = summary["subloops"]
    assert [(r["id"], r["template"], r["outcome"]) for r in tree] == [
        ("m1", "mid", "done"),
        ("m2", "mid", "done"),
    ]
    inner = tree[0]["subloops"]
    assert [(r["id"], r["template"], r["outcome"], r["iterations"]) for r in inner] == [
        ("a", "edit", "done", 1),
        ("b", "edit", "done", 1),
    ]
    assert all(r["tokens"] > 0 for r in inner)
    assert tree[0]["tokens"] == sum(r["tokens"] for r in inner)
    on_disk = json.loads((Path(summary["run_dir"]) / "summary.json").read_text())
    assert on_disk["subloops"] == tree
    # progress lines carry the task ids of every level
    assert "[m1] [a] #1 main" in proc.stderr
    # nothing left behind: no worktree, no branch; the user's branch and index untouched
    assert _git(work, "worktree", "list").count("\n") == 1
    assert _git(work, "branch", "--list", "looprun/*") == ""
    assert _git(work, "rev-parse", "HEAD") == head
    assert _git(work, "diff", "--cached", "--name-only") == ""


def test_too_deep_nesting_is_refused_at_load_time(tmp_path: Path) -> None:
    tpl = tmp_path / "tpl"
    tpl.mkdir()
    (tpl / "edit.yaml").write_text(INNER)
    below = "edit.yaml"
    for level in range(10):
        text = MID.replace("name: mid", f"name: level{level}").replace("./edit.yaml", f"./{below}")
        below = f"level{level}.yaml"
        (tpl / below).write_text(text)
    proc = looprun("validate", str(tpl / below), cwd=tmp_path)
    assert proc.returncode == 2
    assert "sub-loops nested deeper than 8" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
