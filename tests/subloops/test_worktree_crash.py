"""kill -9 of a nested run while a sub-loop's worktree is made or removed (the test-only
crash points of ``LOOPRUN_CRASH_AT``), then ``looprun resume``: the records, worktrees and
branches are reconciled, every sub-loop's change is merged once, nothing is left over."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest
import yaml
from subloop_templates import INNER, edit_turns
from tests.support.cli import cli_env, looprun, scripted_run
from tests.support.git_repos import git_repo

OUTER = """\
looprun: 1
name: two_files
inputs:
  intent: {type: string, required: true}
plan:
  mode: static
  tasks:
    - {id: left, goal: "write the left file"}
    - {id: right, goal: "write the right file"}
each_task:
  uses: ./edit.yaml
  with: {intent: "{{ task.goal }}"}
  isolation: worktree
  parallel: 1
exit: ["subloops.all_done"]
refine:
  - else: {escalate: "{{ subloops.failed }} sub-loop(s) did not finish"}
limits: {max_iterations: 1}
"""


def _git(work: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=work, capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.mark.parametrize(
    "point",
    [
        "subloop.recorded@1",  # the record says running; no worktree yet
        "worktree.half-made@2",  # a branch, and a worktree git still marks locked
        "subloop.merged@1",  # merged and recorded; the worktree not removed
        "worktree.removed@2",  # the worktree removed; its branch not deleted
    ],
)
def test_a_kill_while_a_worktree_is_made_or_removed_resumes(tmp_path: Path, point: str) -> None:
    work = tmp_path / "proj"
    work.mkdir()
    (work / "readme.txt").write_text("two files\n")
    git_repo(work)
    tpl = tmp_path / "tpl"
    tpl.mkdir()
    (tpl / "edit.yaml").write_text(INNER)
    (tpl / "two_files.yaml").write_text(OUTER)
    script = tmp_path / "script.yaml"
    script.write_text(
        yaml.safe_dump(
            {
                "tasks": {
                    "left": edit_turns("left.txt", "left\n"),
                    "right": edit_turns("right.txt", "right\n"),
                }
            }
        )
    )
    args = scripted_run(str(tpl / "two_files.yaml"), intent="two", workdir=work, script=script)
    killed = subprocess.run(
        ["python", "-m", "looprun", *args],
        cwd=work,
        env=cli_env({"LOOPRUN_CRASH_AT": point}),
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    [run_dir] = sorted((work / ".looprun" / "runs").iterdir())

    resumed = looprun("resume", run_dir.name, "--workdir", str(work), "--json", cwd=work)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["outcome"] == "done"
    assert (work / "left.txt").read_text() == "left\n"
    assert (work / "right.txt").read_text() == "right\n"
    records = json.loads((run_dir / "subloops.json").read_text())["records"]
    assert {k: (r["outcome"], r["attempt"]) for k, r in records.items()} == {
        "left": ("done", 1),
        "right": ("done", 1),
    }
    # reconciled: no worktree, branch or worktree registration left behind
    assert _git(work, "branch", "--list", "looprun/*") == ""
    assert len(_git(work, "worktree", "list", "--porcelain").split("\n\n")) == 1
    assert not any((run_dir / "worktrees").glob("*"))
    # each sub-loop's edit was made once: its journal holds one current write
    for name in ("left-1", "right-1"):
        journal = run_dir / "subloops" / name / "journal.jsonl"
        writes = [
            e
            for e in map(json.loads, journal.read_text().splitlines())
            if e["event"] == "tool_call"
        ]
        assert 1 <= len(writes) <= 2, writes  # a redone iteration writes the same file again
