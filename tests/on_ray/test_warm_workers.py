"""Warm workers on a real local Ray cluster: a later run finds the worker an earlier run
started, still holding looprun and its clone, and gets a clean tree of its own commit; a
run joins the cluster while it sets up, before its first sub-loop."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import ray
from cluster_helpers import finish, start_run
from ray_helpers import busy_workers, held_project, one_task_project
from tests.support.cli import looprun, scripted_run

_WORKER = re.compile(r"\[one\] worker \w+ on \S+ pid (\d+)")


def _run(work: Path, script: Path, address: str) -> tuple[dict, int]:
    proc = looprun(
        *scripted_run(str(work / "one.yaml"), intent="abc", workdir=work, script=script),
        "--executor",
        f"ray:{address}",
        "--json",
        cwd=work,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    found = _WORKER.search(proc.stderr)
    assert found, proc.stderr
    return json.loads(proc.stdout), int(found.group(1))


def test_a_later_run_reuses_the_warm_worker_with_a_clean_tree(
    tmp_path: Path, ray_address: str
) -> None:
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    first, script = one_task_project(tmp_path / "first")
    summary, pid = _run(first, script, ray_address)
    assert summary["outcome"] == "done"

    # another project on the same cluster: the worker is the same process, the tree its own
    second, script = one_task_project(tmp_path / "second")
    (second / "own.md").write_text("only here\n")
    subprocess.run(["git", "add", "-A"], cwd=second, check=True)
    subprocess.run(["git", "commit", "-qm", "own"], cwd=second, check=True)
    summary, again = _run(second, script, ray_address)
    assert summary["outcome"] == "done"
    assert again == pid  # warm: no new worker process, looprun imported once
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=second,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    files = sorted(p for p in listed if not p.startswith(".looprun"))
    assert files == ["a.txt", "b.txt", "c.txt", "one.yaml", "own.md", "steps.yaml"]
    assert not busy_workers({pid})


def _driver_jobs(pid: int) -> list[dict]:
    """The Ray jobs (drivers) the process ``pid`` runs on the cluster, alive."""
    jobs = ray._private.state.jobs()
    return [j for j in jobs if j["DriverPid"] == pid and not j["IsDead"]]


def test_a_run_joins_the_cluster_while_its_baseline_runs(tmp_path: Path, ray_address: str) -> None:
    """The run's own check (its baseline, before any sub-loop) waits: the run has joined
    the cluster meanwhile, so its first sub-loop does not wait for Ray's import and the
    join."""
    work, script, signals = held_project(tmp_path, holds=1)
    proc = start_run(str(work / "one.yaml"), "abc", work, script, ray_address)
    try:
        deadline = time.monotonic() + 120
        while not (signals / "ready").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the check never ran"
            time.sleep(0.2)
        deadline = time.monotonic() + 60
        while not _driver_jobs(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        joined = bool(_driver_jobs(proc.pid))
        (signals / "frozen").write_text("")  # the check goes on
        out, err = finish(proc, 300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert joined, "the run had not joined the cluster while its baseline ran"
    assert json.loads(out)["outcome"] == "done", err
