"""A merge conflict between two sub-loops; a kill of the outer process, then resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import yaml
from subloop_templates import edit_turns, write_templates
from tests.support.cli import looprun, scripted_run, start_looprun
from tests.support.git_repos import git_repo

from looprun.journal.read import load_state


def _project(tmp_path: Path) -> Path:
    work = tmp_path / "proj"
    work.mkdir()
    (work / "greeting.txt").write_text("hello\n")
    return git_repo(work)


def test_merge_conflict_is_a_result_and_nothing_is_lost(tmp_path: Path) -> None:
    work = _project(tmp_path)
    outer = write_templates(tmp_path / "tpl")
    script = tmp_path / "script.yaml"
    script.write_text(
        yaml.safe_dump(
            {
                "tasks": {
                    "left": edit_turns("greeting.txt", "hello from the left\n"),
                    "right": edit_turns("greeting.txt", "hello from the right\n"),
                }
            }
        )
    )
    proc = looprun(
        *scripted_run(str(outer), intent="greet", workdir=work, script=script),
        "--json",
        cwd=work,
    )
    summary = json.loads(proc.stdout)
    assert proc.returncode == 5, proc.stderr  # escalated by the refine tree
    assert "1 sub-loop(s) did not finish" in summary["reason"]
    records = json.loads((Path(summary["run_dir"]) / "subloops.json").read_text())["records"]
    outcomes = sorted(r["outcome"] for r in records.values())
    assert outcomes == ["conflict", "done"]
    won = next(r for r in records.values() if r["outcome"] == "done")
    lost = next(r for r in records.values() if r["outcome"] == "conflict")
    assert "greeting.txt" in lost["reason"]
    # the merged side is in the outer tree; the other side is kept on its branch and worktree
    assert (work / "greeting.txt").read_text() == f"hello from the {won['id']}\n"
    kept = subprocess.run(
        ["git", "show", f"{lost['branch']}:greeting.txt"],
        cwd=work,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert kept == f"hello from the {lost['id']}\n"
    assert (Path(lost["worktree"]) / "greeting.txt").read_text() == kept
    assert "conflict" in proc.stderr


def test_kill_outer_process_then_resume_does_not_rerun_finished(tmp_path: Path) -> None:
    work = _project(tmp_path)
    (work / "other.txt").write_text("other\n")
    subprocess.run(["git", "add", "-A"], cwd=work, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "o"],
        cwd=work,
        check=True,
    )
    outer = write_templates(tmp_path / "tpl")
    script = tmp_path / "script.yaml"
    script.write_text(
        yaml.safe_dump(
            {
                "tasks": {
                    "left": edit_turns("greeting.txt", "hello from the left\n"),
                    "right": edit_turns("other.txt", "slow change\n", delay_s=2.5),
                }
            }
        )
    )
    proc = start_looprun(
        *scripted_run(str(outer), intent="greet", workdir=work, script=script),
        cwd=work,
    )
    runs = work / ".looprun" / "runs"
    records: dict = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        files = list(runs.glob("*/subloops.json")) if runs.exists() else []
        if files:
            try:
                records = json.loads(files[0].read_text())["records"]
            except (ValueError, OSError):
                records = {}
            right = files[0].parent / "subloops" / "right-1"
            if (
                records.get("left", {}).get("outcome") == "done"
                and records.get("right", {}).get("outcome") == "running"
                # a sub-loop killed before its first saved state starts again, not resumes
                and load_state(right) is not None
            ):
                break
        time.sleep(0.05)
    else:
        proc.kill()
        raise AssertionError(f"never saw left done while right ran: {records}")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    run_id = files[0].parent.name
    left_journal = files[0].parent / "subloops" / "left-1" / "journal.jsonl"
    before = left_journal.read_text()

    res = looprun("resume", run_id, "--workdir", str(work), "--json", cwd=work)
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["outcome"] == "done"
    assert left_journal.read_text() == before  # the finished sub-loop did not run again
    run_dir = files[0].parent
    assert sorted(p.name for p in (run_dir / "subloops").iterdir()) == ["left-1", "right-1"]
    right_events = [
        json.loads(x)
        for x in (run_dir / "subloops" / "right-1" / "journal.jsonl").read_text().splitlines()
    ]
    assert any(e.get("event") == "resumed" for e in right_events)
    assert (work / "greeting.txt").read_text() == "hello from the left\n"
    assert (work / "other.txt").read_text() == "slow change\n"
    assert "merged again after resume" in res.stderr


def test_outer_refine_replans_a_conflict_and_lists_the_kept_attempt(tmp_path: Path) -> None:
    work = _project(tmp_path)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=work, capture_output=True, text=True, check=True
    ).stdout
    outer = write_templates(tmp_path / "tpl")
    outer.write_text(
        outer.read_text()
        .replace(
            "  - if: subloops.failed\n",
            '  - if: subloops.counts.conflict and iteration < 3\n    then: {replan: "resolve"}\n'
            "  - if: subloops.failed\n",
        )
        .replace("max_iterations: 1", "max_iterations: 3")
    )
    script = tmp_path / "script.yaml"
    right = [
        edit_turns("greeting.txt", "hello from the right\n", delay_s=0.3),
        edit_turns("greeting.txt", "hello from both\n"),
    ]
    script.write_text(
        yaml.safe_dump(
            {
                "tasks": {
                    "left": edit_turns("greeting.txt", "hello from the left\n"),
                    "right": {"attempts": right},
                }
            }
        )
    )
    proc = looprun(
        *scripted_run(str(outer), intent="greet", workdir=work, script=script),
        "--json",
        cwd=work,
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["iterations"] == 2
    assert (work / "greeting.txt").read_text() == "hello from both\n"
    rows = {r["id"]: r for r in summary["subloops"]}
    assert rows["right"]["outcome"] == "done" and rows["right"]["attempt"] == 2
    # the conflicted first attempt is kept for inspection and listed, not a stray
    (earlier,) = rows["right"]["earlier_attempts"]
    assert earlier["attempt"] == 1 and earlier["outcome"] == "conflict"
    assert (Path(earlier["kept"]) / "greeting.txt").read_text() == "hello from the right\n"
    assert "(attempt 1: conflict, kept:" in proc.stderr
    worktrees = subprocess.run(
        ["git", "worktree", "list"], cwd=work, capture_output=True, text=True, check=True
    ).stdout
    assert worktrees.count("\n") == 2 and earlier["kept"] in worktrees
    branches = subprocess.run(
        ["git", "branch", "--list", "--format=%(refname:short)", "looprun/*"],
        cwd=work,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert branches == [earlier["branch"]]
    after = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=work, capture_output=True, text=True, check=True
    ).stdout
    assert after == head  # the user's branch is untouched
