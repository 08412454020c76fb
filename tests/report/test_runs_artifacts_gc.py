"""`looprun runs` columns, per-iteration artifacts, and `looprun gc` on real runs."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from tests.report.runs import real_run
from tests.support.cli import looprun


def _refs(repo: Path) -> list[str]:
    out = subprocess.run(
        ["git", "for-each-ref", "--format=%(refname)", "refs/looprun/", "refs/looprun-sealed/"],
        cwd=repo, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return out.stdout.split()


def test_runs_lists_start_duration_iterations_cost_and_outcome(finished_run) -> None:
    repo, run_id, _ = finished_run
    rows = json.loads(looprun("runs", "--json", cwd=repo).stdout)
    (row,) = rows
    assert (row["run_id"], row["outcome"], row["iterations"]) == (run_id, "done", 2)
    assert row["duration_s"] > 0 and row["tokens"] > 0 and row["cost_usd"] == 0.0
    header, line = looprun("runs", cwd=repo).stdout.splitlines()
    assert header.split() == [
        "RUN", "STARTED", "DURATION", "ITER", "TOKENS", "COST", "OUTCOME", "TEMPLATE", "RESUME",
    ]  # fmt: skip
    assert line.startswith(run_id)
    assert row["started"].replace("T", " ") in line
    assert line.split()[4:9] == ["2", f"{row['tokens']:,}", "$0.0000", "done", "mini.yaml"]


def test_each_iteration_keeps_its_own_artifacts(finished_run) -> None:
    repo, run_id, _ = finished_run
    run_dir = repo / ".looprun" / "runs" / run_id
    artifacts, kept = run_dir / "artifacts", run_dir / "kept"
    first = (kept / "1" / "junit.xml").read_text()
    second = (kept / "2" / "junit.xml").read_text()
    assert 'failures="1"' in first and 'failures="0"' in second
    assert (kept / "1" / "tests.output.txt").is_file()
    assert not (artifacts / "1").exists()  # copies never go where commands write
    assert (artifacts / "junit.xml").read_text() == second  # run.artifacts: the latest


def test_gc_prunes_the_refs_of_deleted_runs_only(tmp_path: Path) -> None:
    repo, first, _ = real_run(tmp_path / "a")
    (tmp_path / "a" / "script.yaml").rename(tmp_path / "a" / "script-used.yaml")
    # a second run in the same repository, from the same start
    subprocess.run(["git", "stash", "-u", "-q"], cwd=repo, check=True)
    script = tmp_path / "a" / "script-used.yaml"
    proc = looprun(
        str(tmp_path / "a" / "mini.yaml"), "--intent", "again", "--model", f"script:{script}",
        "--json", cwd=repo,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    second = json.loads(proc.stdout)["run_id"]
    before = _refs(repo)
    assert any(r.startswith(f"refs/looprun/{first}/") for r in before)
    assert any(r.startswith("refs/looprun/base/") for r in before)
    assert f"refs/looprun-sealed/{first}" in before  # its run.json, sealed

    shutil.rmtree(repo / ".looprun" / "runs" / first)
    dry = looprun("gc", "--dry-run", cwd=repo)
    assert (
        dry.returncode == 0 and f"would prune 3 ref(s) of 1 deleted run(s): {first}" in dry.stdout
    )
    assert _refs(repo) == before
    done = looprun("gc", cwd=repo)
    assert done.returncode == 0, done.stderr
    after = _refs(repo)
    assert not any(first in r for r in after)
    assert [r for r in after if second in r] == [r for r in before if second in r]
    # the base both runs started from stays while one of them remains
    assert [r for r in after if "/base/" in r] == [r for r in before if "/base/" in r]
    # the report of the remaining run still has its diffs
    data = json.loads(looprun("report", second, "--format", "json", cwd=repo).stdout)
    assert "+    return a + b" in data["iterations"][-1]["diff"]
