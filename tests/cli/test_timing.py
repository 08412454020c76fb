"""``--json`` says where a run's (or a resume's) wall time went: phases that cover the run from the
process's start to its summary, so they add up to the total. Checked on a real run of the
CLI, in a real git repository."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.support.git_repos import git_repo

PHASES = {
    "startup",
    "setup",
    "baseline",
    "plan",
    "turns",
    "checks",
    "policy",
    "records",
    "workspace",
    "loop",
    "finish",
}


def _repo(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    (repo / "app.py").write_text("x = 1\n", encoding="utf-8")
    return git_repo(repo)


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    env["LOOPRUN_CACHE_DIR"] = str(tmp_path / "cache")
    return {**env, **extra}


def _looprun(env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "looprun", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    return proc, time.perf_counter() - started


def _start(tmp_path: Path) -> tuple[Path, Path]:
    """The repository and the arguments of a one-iteration ``--until`` run in it."""
    repo = _repo(tmp_path)
    script = tmp_path / "script.json"
    turn = {"name": "write_file", "arguments": {"path": "notes.txt", "content": "hi\n"}}
    script.write_text(json.dumps([{"tool_calls": [turn]}, {"text": "ok"}]), encoding="utf-8")
    return repo, script


def _run(tmp_path: Path, check: str = "true", **extra: str) -> tuple[dict, float]:
    repo, script = _start(tmp_path)
    proc, wall = _looprun(
        _env(tmp_path, **extra),
        *("--until", check, "--intent", "a note"),
        *("--workdir", str(repo), "--model", f"script:{script}", "--json"),
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), wall


def _check_phases(timing: dict, wall: float) -> dict:
    phases = timing["phases"]
    assert set(phases) == PHASES
    assert all(isinstance(v, float | int) and v >= 0 for v in phases.values())
    total = timing["total_s"]
    # each phase is rounded to the millisecond
    assert abs(sum(phases.values()) - total) <= 0.001 * len(PHASES) + 1e-9
    # the total is the process's own life up to the summary: within what the caller saw
    assert 0 < total <= wall + 0.05
    if Path("/proc/self/stat").exists():  # the process's start is known: the imports count
        assert phases["startup"] > 0
    return phases


def _killed_then_resumed(tmp_path: Path, crash_at: str) -> tuple[dict, float]:
    """A run killed at ``crash_at`` (a real SIGKILL), then ``looprun resume --json``."""
    repo, script = _start(tmp_path)
    killed, _ = _looprun(
        _env(tmp_path, LOOPRUN_CRASH_AT=crash_at),
        *("--until", "true", "--intent", "a note"),
        *("--workdir", str(repo), "--model", f"script:{script}", "--json"),
    )
    assert killed.returncode == -9, killed.stderr
    (run_id,) = [p.name for p in (repo / ".looprun" / "runs").iterdir()]
    proc, wall = _looprun(_env(tmp_path), "resume", run_id, "--workdir", str(repo), "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["outcome"] == "done" and summary["run_id"] == run_id
    return summary, wall


def test_phases_add_up_to_the_total(tmp_path: Path) -> None:
    summary, wall = _run(tmp_path)
    phases = _check_phases(summary["timing"], wall)
    # the work of this run is where it was done: a baseline and a check ran, records
    # were written, git was asked
    assert phases["baseline"] > 0
    assert phases["checks"] > 0
    assert phases["records"] > 0
    assert phases["workspace"] > 0


def test_a_resumed_run_says_where_its_time_went(tmp_path: Path) -> None:
    """Killed after its first saved step, the run resumes and does the iteration: the
    resume's own check, records and git work are in its phases."""
    summary, wall = _killed_then_resumed(tmp_path, "after:state")
    phases = _check_phases(summary["timing"], wall)
    assert phases["checks"] > 0
    assert phases["records"] > 0
    assert phases["workspace"] > 0
    assert phases["baseline"] == 0  # recorded before the kill, not run again
    recorded = json.loads((Path(summary["run_dir"]) / "summary.json").read_text("utf-8"))
    assert "timing" not in recorded


def test_a_resume_that_only_writes_the_summary_has_timing_too(tmp_path: Path) -> None:
    """Killed just before its summary, the run's resume only writes it down: no engine
    ran, so the time is start-up, setup and the summary."""
    summary, wall = _killed_then_resumed(tmp_path, "before:summary")
    phases = _check_phases(summary["timing"], wall)
    assert phases["checks"] == 0 and phases["baseline"] == 0


def test_a_slow_check_shows_in_the_baseline_and_the_checks(tmp_path: Path) -> None:
    """The check's time is counted where it ran: once before the first turn, once after."""
    summary, _ = _run(tmp_path, "sleep 0.3")
    phases = summary["timing"]["phases"]
    assert phases["baseline"] >= 0.3
    assert phases["checks"] >= 0.3
    assert phases["loop"] < 0.3 and phases["setup"] < 0.3


def test_the_run_record_keeps_no_timing(tmp_path: Path) -> None:
    """Timing is for the caller: the recorded summary stays comparable run to run."""
    summary, _ = _run(tmp_path)
    recorded = json.loads((Path(summary["run_dir"]) / "summary.json").read_text("utf-8"))
    assert "timing" not in recorded
