"""The built-in feature template on a sample project, end to end through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.cli import cli_env, looprun, scripted_run


def test_feature_plans_runs_in_parallel_retries_and_merges(shapes: Path) -> None:
    intent = (shapes / "intent.txt").read_text()
    proc = looprun(
        *scripted_run("feature", intent=intent, workdir=shapes, script=shapes / "script.yaml"),
        "--json",
        cwd=shapes,
        timeout=300,  # three sub-loops, each with a baseline and real pytest runs
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["outcome"] == "done"
    assert summary["iterations"] == 2  # one replan of the failed task
    run_dir = Path(summary["run_dir"])
    records = json.loads((run_dir / "subloops.json").read_text())["records"]
    assert {k: v["outcome"] for k, v in records.items()} == {
        "circle": "done",
        "square": "done",
        "total": "done",
    }
    assert records["circle"]["attempt"] == 2 and records["square"]["attempt"] == 1
    # circle and square ran at the same time: each started before the other finished
    events = {}
    for name in ("circle-1", "square-1"):
        lines = (run_dir / "subloops" / name / "journal.jsonl").read_text().splitlines()
        evs = [json.loads(x) for x in lines]
        events[name] = (evs[0]["ts"], evs[-1]["ts"])
    assert events["circle-1"][0] < events["square-1"][1]
    assert events["square-1"][0] < events["circle-1"][1]
    # the failed first attempt left its worktree and branch; the rest were cleaned up
    first = run_dir / "worktrees" / "circle-1"
    assert first.is_dir() and "3 * r * r" in (first / "shapes" / "circle.py").read_text()
    assert not (run_dir / "worktrees" / "square-1").exists()
    branches = subprocess.run(
        ["git", "branch", "--list", "looprun/*"],
        cwd=shapes,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "circle-1" in branches and "square-1" not in branches
    # all three changes merged into the outer tree, and the suite is green
    for f in ("shapes/circle.py", "shapes/square.py", "shapes/total.py", "tests/test_total.py"):
        assert (shapes / f).is_file(), f
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=shapes,
        env=cli_env(),
        capture_output=True,
        text=True,
    )
    assert tests.returncode == 0, tests.stdout
    assert "4 passed" in tests.stdout
    # progress lines carry the task id; the summary tree lists every task
    assert "[square] #1 reproduce" in proc.stderr
    assert "sub-loops of feature:" in proc.stderr
    assert "└─ total" in proc.stderr
    # the outer loop's own lines name no single task: one outer turn runs them all
    outer_lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("#")]
    assert [ln.split(":")[0] for ln in outer_lines] == ["#1 sub-loops", "#2 sub-loops"]


def _held_out(tmp_path: Path, body: str) -> Path:
    held = tmp_path / "acceptance"
    held.mkdir()
    (held / "test_acceptance_k4.py").write_text(
        "import math\n\nfrom shapes.total import total_area\n\n\n" + body
    )
    return held


def _feature(shapes: Path, held: Path, *extra: str) -> tuple[dict, str]:
    intent = (shapes / "intent.txt").read_text()
    proc = looprun(
        *scripted_run("feature", intent=intent, workdir=shapes, script=shapes / "script.yaml"),
        "--set",
        f"holdout={held}",
        "--json",
        *extra,
        cwd=shapes,
        timeout=300,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout), proc.stderr


@pytest.mark.e2e
def test_feature_is_done_when_the_merged_tree_passes_the_held_out_check(
    shapes: Path, tmp_path: Path
) -> None:
    held = _held_out(
        tmp_path,
        "def test_mixed_total_k4():\n    assert total_area([2], [1]) == math.pi * 4 + 1\n",
    )
    summary, stderr = _feature(shapes, held)
    assert summary["outcome"] == "done", stderr
    assert not (shapes / "holdout_tests").exists()  # copied in only while the check ran


def test_feature_is_not_done_when_the_held_out_check_fails_and_learns_only_that(
    shapes: Path, tmp_path: Path
) -> None:
    # the merged tree is right for the visible tests and wrong for this acceptance test
    held = _held_out(tmp_path, "def test_unit_circle_k4():\n    assert total_area([1], []) == 3\n")
    summary, stderr = _feature(shapes, held, "--max-iterations", "2")
    assert summary["outcome"] != "done", stderr
    run_dir = Path(summary["run_dir"])
    seen = "".join(p.read_text() for p in run_dir.rglob("exchanges.jsonl"))
    assert "a held-out check failed" in seen  # the replan is told, and only that
    for secret in ("test_unit_circle_k4", "test_acceptance_k4", "== 3"):
        assert secret not in seen
    assert not (shapes / "holdout_tests").exists()
