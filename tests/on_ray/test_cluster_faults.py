"""What a multi-node cluster does to a run, on a real Ray cluster of several nodes on
127.0.0.1 (a head holding the driver's node, worker nodes running the sub-loops): a
frozen node's sub-loop relaunched within the watchdog, a lost head (killed or frozen)
ending the run like a Ctrl-C (saved, resumable), and a killed node with progress and
Ctrl-C intact."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from cluster_helpers import LocalCluster, finish, run_dir_of, start_run
from ray_helpers import held_project, one_task_project, wait_for, wait_pushed
from tests.remote.remote_helpers import step_turns
from tests.support.cli import looprun

WORKER = r"\[one\] worker (\w+) on \S+ pid (\d+)"


@pytest.fixture
def cluster() -> Iterator[LocalCluster]:
    c = LocalCluster()
    try:
        yield c
    finally:
        c.close()


def _start(
    work: Path,
    script: Path,
    address: str,
    env: dict[str, str] | None = None,
    *,
    as_json: bool = True,
) -> subprocess.Popen:
    return start_run(str(work / "one.yaml"), "abc", work, script, address, env, as_json=as_json)


def _exchanges_per_iteration(sub: Path) -> Counter:
    rows = [json.loads(x) for x in (sub / "exchanges.jsonl").read_text().splitlines()]
    return Counter(r["iteration"] for r in rows)


def _steps_by_pid(sub: Path) -> dict[int, int]:
    events = [json.loads(x) for x in (sub / "journal.jsonl").read_text().splitlines()]
    return {e["iteration"]: e["pid"] for e in events if e["event"] == "iteration"}


def _lease_executions(work: Path) -> list[tuple[str, str]]:
    """The one sub-loop's lease history on the remote (the outer repository itself),
    oldest first: (note, execution) per commit."""
    refs = subprocess.run(
        ["git", "for-each-ref", "--format=%(refname)", "refs/looprun-sync/"],
        cwd=work,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    (ref,) = [r for r in refs if r.endswith("/lease")]
    log = subprocess.run(
        ["git", "log", "--reverse", "--format=%s%x00%b%x1e", ref],
        cwd=work,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = []
    for entry in filter(str.strip, log.split("\x1e")):
        subject, _, body = entry.strip().partition("\x00")
        execution = re.search(r"^execution: (\S+)$", body, re.MULTILINE)
        rows.append((subject, execution.group(1) if execution else ""))
    return rows


def _quick(script: Path, delay_s: float = 0.0) -> None:
    script.write_text(yaml.safe_dump({"tasks": {"one": step_turns(delay_s)}}))


def _stopped_as_lost(work: Path, stderr: str, reason: str) -> Path:
    """The run stopped as a Ctrl-C stops it, for the lost cluster: recorded interrupted
    with ``reason`` in its summary, the verdict naming the stop and how to go on, the
    sub-loop still running (to be resumed); returns the run directory."""
    assert "Traceback" not in stderr
    run_dir = run_dir_of(work)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["outcome"] == "interrupted"
    assert reason in summary["reason"], summary["reason"]
    assert re.search(r"→ interrupted after \d+ iteration\(s\): the Ray cluster was lost", stderr)
    assert f"continue with: looprun resume {run_dir.name}" in stderr, stderr
    records = json.loads((run_dir / "subloops.json").read_text())["records"]
    assert records["one"]["outcome"] == "running"
    return run_dir


def _resumes_to_done(work: Path, run_dir: Path, script: Path, address: str) -> None:
    """``looprun resume`` on the cluster at ``address`` ends done, step 1 not played again."""
    _quick(script)
    resumed = looprun(
        "resume", run_dir.name, "--executor", f"ray:{address}", "--json", cwd=work, timeout=600
    )
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["outcome"] == "done"
    sub = run_dir / "subloops" / "one-1"
    assert _exchanges_per_iteration(sub) == {1: 2, 2: 2, 3: 2}  # step 1 not replayed
    assert all((work / f).is_file() for f in ("a.txt", "b.txt", "c.txt"))


def test_a_frozen_node_s_sub_loop_is_relaunched_within_the_watchdog(
    tmp_path: Path, cluster: LocalCluster
) -> None:
    cluster.add_nodes(2)
    work, script = one_task_project(tmp_path, delay_s=20)
    proc = _start(work, script, cluster.address, {"LOOPRUN_RAY_WATCHDOG_S": "15"})
    lines: list[str] = []
    try:
        stale = wait_for(proc, WORKER, lines, 300)
        stale_execution, stale_pid = stale.group(1), int(stale.group(2))
        wait_for(proc, r"\[one\] #1 ", lines, 300)
        wait_pushed(work, "one", 1, lines)
        node = cluster.node_of(stale_pid)
        # the next execution waits a little on its first call (well within the watchdog),
        # so that the stale one, thawed, comes back while it runs
        _quick(script, delay_s=4)
        node.signal(signal.SIGSTOP)
        frozen = time.monotonic()
        wait_for(proc, r"\[one\] no pushed step for 15 s: cancelling", lines, 60)
        fired = time.monotonic() - frozen
        # the lease is polled every 5 s; the relaunch never waits for the frozen node
        assert fired < 15 + 8, f"the watchdog fired {fired:.1f} s after the freeze"
        wait_for(proc, r"\[one\] no progress within the watchdog period: resuming", lines, 10)
        fresh = wait_for(proc, WORKER, lines, 120)
        assert int(fresh.group(2)) != stale_pid and not node.runs(int(fresh.group(2)))
        node.signal(signal.SIGCONT)  # the stale worker wakes while the new one holds the lease
        # a killed warm worker's end is known at once (Ray marks the actor dead), so
        # its line may come before the fresh worker's
        if not any(re.search(r"\[one\] a replaced execution ended", line) for line in lines):
            wait_for(proc, r"\[one\] a replaced execution ended", lines, 60)
        out, err = finish(proc, 300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, "".join(lines) + err
    assert json.loads(out)["outcome"] == "done"
    run_dir = run_dir_of(work)
    sub = run_dir / "subloops" / "one-1"
    assert _exchanges_per_iteration(sub) == {1: 2, 2: 2, 3: 2}  # no step played twice
    ran = _steps_by_pid(sub)
    assert ran[1] == stale_pid and ran[2] == ran[3] != stale_pid, ran
    assert all((work / f).is_file() for f in ("a.txt", "b.txt", "c.txt"))
    # nothing of the stale execution landed after the grant that fenced it out
    history = _lease_executions(work)
    regrant = max(i for i, (note, _) in enumerate(history) if "granted" in note)
    assert any(e.startswith(stale_execution) for _, e in history[:regrant])
    assert not any(e.startswith(stale_execution) for _, e in history[regrant:]), history


def test_a_lost_head_stops_the_run_like_ctrl_c_and_it_resumes_on_another_cluster(
    tmp_path: Path, cluster: LocalCluster, ray_address: str
) -> None:
    cluster.add_nodes(1)
    work, script = one_task_project(tmp_path, delay_s=60)
    proc = _start(work, script, cluster.address, as_json=False)
    lines: list[str] = []
    try:
        wait_for(proc, WORKER, lines, 300)
        wait_for(proc, r"\[one\] #1 ", lines, 300)
        wait_pushed(work, "one", 1, lines)
        cluster.kill(cluster.head)
        killed = time.monotonic()
        _out, err = finish(proc, 120)
        took = time.monotonic() - killed
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    stderr = "".join(lines) + err
    assert proc.returncode == 130, stderr
    assert took < 40, f"exit {took:.1f} s after the head died (Ray's own limit is 60 s)"
    run_dir = _stopped_as_lost(work, stderr, "the Ray cluster was lost")
    # the surviving node's worker still runs the slow step: the resume's lease fences it out
    _resumes_to_done(work, run_dir, script, ray_address)


def test_a_frozen_head_stops_the_run_like_ctrl_c_and_it_resumes_once_thawed(
    tmp_path: Path, cluster: LocalCluster
) -> None:
    """A stopped head still completes TCP handshakes (the kernel answers for its
    listening socket): only its silence to a call shows it is gone."""
    cluster.add_nodes(1)
    work, script = one_task_project(tmp_path, delay_s=60)
    proc = _start(work, script, cluster.address, as_json=False)
    lines: list[str] = []
    try:
        wait_for(proc, WORKER, lines, 300)
        wait_for(proc, r"\[one\] #1 ", lines, 300)
        wait_pushed(work, "one", 1, lines)
        cluster.head.signal(signal.SIGSTOP)  # its GCS, raylet and workers (the board)
        frozen = time.monotonic()
        try:
            _out, err = finish(proc, 120)
            took = time.monotonic() - frozen
        finally:
            cluster.head.signal(signal.SIGCONT)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    stderr = "".join(lines) + err
    assert proc.returncode == 130, stderr
    # LOOPRUN_RAY_HEAD_TIMEOUT_S (5 s) of silence, probes of 2 s: well before Ray's 60 s
    assert took < 30, f"exit {took:.1f} s after the head froze"
    run_dir = _stopped_as_lost(
        work, stderr, f"the Ray cluster was lost (its head {cluster.address}"
    )
    # thawed, the same cluster takes the run back; step 1 is not played again
    _resumes_to_done(work, run_dir, script, cluster.address)


def test_a_killed_node_keeps_progress_and_ctrl_c_then_the_run_resumes(
    tmp_path: Path, cluster: LocalCluster
) -> None:
    cluster.add_nodes(2)
    work, script = one_task_project(tmp_path, delay_s=60)
    proc = _start(work, script, cluster.address)
    lines: list[str] = []
    try:
        first = wait_for(proc, WORKER, lines, 300)
        wait_for(proc, r"\[one\] #1 ", lines, 300)
        wait_pushed(work, "one", 1, lines)
        cluster.kill(cluster.node_of(int(first.group(2))))
        wait_for(proc, r"\[one\] worker lost .*resuming from its last pushed step", lines, 120)
        # progress lines still come, from the worker on the other node
        second = wait_for(proc, WORKER, lines, 120)
        assert second.group(2) != first.group(2)
        time.sleep(1)
        started = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        out, err = finish(proc, 60)
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    stderr = "".join(lines) + err
    assert proc.returncode == 130, stderr
    assert took < 15, f"exit after {took:.1f} s"
    assert "Traceback" not in stderr
    summary = json.loads(out)
    assert summary["outcome"] == "interrupted" and "SIGINT" in summary["reason"]
    run_dir = run_dir_of(work)
    records = json.loads((run_dir / "subloops.json").read_text())["records"]
    assert records["one"]["outcome"] == "running"
    _resumes_to_done(work, run_dir, script, cluster.address)


def _freeze_while_held(
    proc: subprocess.Popen, cluster: LocalCluster, signals: Path
) -> tuple[str, str, float]:
    """Freeze the head while the check waits, let it go on; (stdout, stderr, seconds
    from the freeze to the run's end). The head is thawed before this returns."""
    try:
        deadline = time.monotonic() + 300
        while not (signals / "ready").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the check never ran"
            time.sleep(0.2)
        cluster.head.signal(signal.SIGSTOP)
        frozen = time.monotonic()
        (signals / "frozen").write_text("")
        try:
            out, err = finish(proc, 180)
            return out, err, time.monotonic() - frozen
        finally:
            cluster.head.signal(signal.SIGCONT)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_a_head_frozen_after_the_last_sub_loop_does_not_hold_the_exit(
    tmp_path: Path, cluster: LocalCluster
) -> None:
    """The head freezes while the outer loop's own check runs, after its sub-loop. The
    run ends done at once: Ray's exit handler would wait on the head."""
    cluster.add_nodes(1)
    work, script, signals = held_project(tmp_path, holds=2)
    out, err, took = _freeze_while_held(_start(work, script, cluster.address), cluster, signals)
    assert json.loads(out)["outcome"] == "done", err
    assert f"the Ray cluster's head {cluster.address} does not answer" in err
    assert "Traceback" not in err and "SIGTERM handler" not in err  # joined off the main thread
    assert took < 30, f"exit {took:.1f} s after the head froze"


def test_a_head_frozen_before_the_first_sub_loop_stops_the_run_and_it_resumes(
    tmp_path: Path, cluster: LocalCluster
) -> None:
    """The head freezes during the baseline check, before this run first joins the
    cluster: joining gives up (Ray would wait for many minutes) and the run stops as a
    Ctrl-C stops it; thawed, the cluster takes the run back."""
    cluster.add_nodes(1)
    work, script, signals = held_project(tmp_path, holds=1)
    proc = _start(work, script, cluster.address, {"LOOPRUN_RAY_JOIN_TIMEOUT_S": "10"})
    out, err, took = _freeze_while_held(proc, cluster, signals)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert took < 45, f"exit {took:.1f} s after the head froze"
    summary = json.loads(out)
    assert summary["outcome"] == "interrupted"
    assert "the Ray cluster was lost" in summary["reason"]
    assert "did not let this run join within 10 s" in summary["reason"]
    _resumes_to_done(work, run_dir_of(work), script, cluster.address)


def _board_pids(cluster: LocalCluster) -> list[int]:
    """The processes of this cluster's progress and stop board (the run's ``Board``)."""
    out = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True)
    pids = [int(r.split()[0]) for r in out.stdout.splitlines()[1:] if "ray::Board" in r]
    return [p for node in cluster.nodes for p in node.workers() if p in pids]


def test_a_lost_board_keeps_progress_and_ctrl_c_then_the_run_resumes(
    tmp_path: Path, cluster: LocalCluster
) -> None:
    """The process hosting the run's board (its stop flag) dies while a sub-loop runs:
    the sub-loop goes on, progress lines still come, Ctrl-C stops the run (exit 130,
    saved), and the run resumes to done."""
    cluster.add_nodes(1)
    work, script = one_task_project(tmp_path)
    turns = step_turns(delay_second_s=15)
    turns[4]["delay_s"] = 60  # the third step waits too: Ctrl-C comes while it does
    script.write_text(yaml.safe_dump({"tasks": {"one": turns}}))
    proc = _start(work, script, cluster.address)
    lines: list[str] = []
    try:
        first = wait_for(proc, WORKER, lines, 300)
        wait_for(proc, r"\[one\] #1 ", lines, 300)
        (board,) = _board_pids(cluster)
        os.kill(board, signal.SIGKILL)
        # the worker keeps its job: its next step's line comes, from the same worker
        wait_for(proc, r"\[one\] #2 ", lines, 120)
        assert not any("worker lost" in line for line in lines), "".join(lines)
        wait_pushed(work, "one", 2, lines)
        time.sleep(1)  # its third step's model call has begun
        started = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        out, err = finish(proc, 60)
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    stderr = "".join(lines) + err
    assert proc.returncode == 130, stderr
    assert took < 20, f"exit after {took:.1f} s"
    assert "Traceback" not in stderr
    assert json.loads(out)["outcome"] == "interrupted"
    workers = {m.group(2) for m in re.finditer(WORKER, stderr)}
    assert workers == {first.group(2)}, stderr  # never relaunched
    run_dir = run_dir_of(work)
    records = json.loads((run_dir / "subloops.json").read_text())["records"]
    assert records["one"]["outcome"] == "running"
    _resumes_to_done(work, run_dir, script, cluster.address)
