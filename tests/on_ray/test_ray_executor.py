"""Sub-loops on a real local Ray cluster through the real CLI: the same result as local
threads, a killed worker resumed (never re-run), Ctrl-C and kill -9 of the outer run,
the watchdog, and no secret on the wire."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import yaml
from ray_helpers import (
    busy_workers,
    gone,
    one_task_project,
    run_workers,
    wait_for,
    wait_pushed,
    worker_pid,
)
from tests.remote.remote_helpers import step_turns
from tests.support.cli import cli_env, looprun, scripted_run, start_looprun
from tests.support.git_repos import git_repo

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def _one(tmp: Path, delay_s: float) -> tuple[Path, Path]:
    return one_task_project(tmp, delay_s)


def _shapes(tmp: Path, name: str) -> Path:
    work = tmp / name
    shutil.copytree(SAMPLES / "feature_shapes", work, ignore=shutil.ignore_patterns(".looprun"))
    return git_repo(work)


def _files(tree: Path) -> dict[str, str]:
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return {p: (tree / p).read_text() for p in listed if not p.startswith(".looprun")}


def _records(summary: dict) -> dict[str, tuple[str, int, int]]:
    data = json.loads((Path(summary["run_dir"]) / "subloops.json").read_text())["records"]
    return {k: (v["outcome"], v["attempt"], v["iterations"]) for k, v in data.items()}


def _exchanges_per_iteration(run_dir: Path) -> Counter:
    rows = [json.loads(x) for x in (run_dir / "exchanges.jsonl").read_text().splitlines()]
    return Counter(r["iteration"] for r in rows)


def test_the_feature_sample_on_ray_ends_as_it_does_locally(
    tmp_path: Path, ray_address: str
) -> None:
    sentinel = "sk-ray-sentinel-93b1d7c2"
    results = {}
    for name, extra in (("local", []), ("ray", ["--executor", f"ray:{ray_address}"])):
        work = _shapes(tmp_path, name)
        proc = looprun(
            *scripted_run(
                "feature",
                intent=(work / "intent.txt").read_text(),
                workdir=work,
                script=work / "script.yaml",
            ),
            *extra,
            "--json",
            cwd=work,
            env={"OPENAI_API_KEY": sentinel},
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr
        results[name] = (json.loads(proc.stdout), _files(work), proc.stderr, work)
    (local, local_tree, _, _), (remote, ray_tree, stderr, work) = results["local"], results["ray"]
    assert remote["outcome"] == local["outcome"] == "done"
    assert _records(remote) == _records(local)
    assert ray_tree == local_tree  # the same merged tree
    # progress came back while the sub-loops ran, not only with their results
    lines = stderr.splitlines()
    first_step = next(i for i, x in enumerate(lines) if x.startswith("[square] #1 "))
    result = next(i for i, x in enumerate(lines) if x.startswith("[square] sub-loop result"))
    assert first_step < result
    assert re.search(r"\[square\] worker \w+ on \S+ pid \d+", stderr)
    # each sub-loop's journal came back into the outer run directory
    run_dir = Path(remote["run_dir"])
    assert (run_dir / "subloops" / "square-1" / "summary.json").is_file()
    # no secret in anything git carried (jobs travel as Ray arguments: see the worker tests)
    objects = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"],
        cwd=work,
        capture_output=True,
        check=True,
    ).stdout
    assert sentinel.encode() not in objects
    workers = run_workers(stderr)
    assert workers and not busy_workers(workers)


def test_a_killed_worker_is_resumed_from_its_last_pushed_step(
    tmp_path: Path, ray_address: str
) -> None:
    work, script = _one(tmp_path, delay_s=60)
    proc = start_looprun(
        *scripted_run(str(work / "one.yaml"), intent="abc", workdir=work, script=script),
        "--executor",
        f"ray:{ray_address}",
        "--json",
        cwd=work,
        text=True,
        stdout=subprocess.PIPE,
    )
    lines: list[str] = []
    wait_for(proc, r"\[one\] #1 ", lines, 300)
    script.write_text(yaml.safe_dump({"tasks": {"one": step_turns()}}))  # the next one is quick
    wait_pushed(work, "one", 1, lines)
    killed = worker_pid(lines)
    os.kill(killed, signal.SIGKILL)
    wait_for(proc, r"\[one\] worker lost .*resuming from its last pushed step", lines, 120)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, "".join(lines) + err
    assert out.lstrip().startswith("{"), out  # --json: stdout holds the summary alone
    assert "(raylet)" not in out  # Ray's dead-worker notice, when it prints one, is on stderr
    summary = json.loads(out)
    run_dir = next((work / ".looprun" / "runs").iterdir())
    sub = run_dir / "subloops" / "one-1"
    assert _exchanges_per_iteration(sub) == {1: 2, 2: 2, 3: 2}  # iteration 1 played once
    events = [json.loads(x) for x in (sub / "journal.jsonl").read_text().splitlines()]
    assert [e["iteration"] for e in events if e["event"] == "resumed"] == [1]
    # each step says which worker ran it: the killed one, then its replacement
    ran = {e["iteration"]: (e["host"], e["pid"]) for e in events if e["event"] == "iteration"}
    assert ran[1][1] == killed and ran[2][1] != killed and ran[2] == ran[3], ran
    assert all((work / f).is_file() for f in ("a.txt", "b.txt", "c.txt"))
    assert summary["outcome"] == "done"


def test_ctrl_c_stops_the_outer_run_and_its_workers_within_ten_seconds(
    tmp_path: Path, ray_address: str
) -> None:
    work, script = _one(tmp_path, delay_s=120)
    proc = start_looprun(
        *scripted_run(str(work / "one.yaml"), intent="abc", workdir=work, script=script),
        "--executor",
        f"ray:{ray_address}",
        cwd=work,
        text=True,
    )
    lines: list[str] = []
    wait_for(proc, r"\[one\] #1 ", lines, 300)
    worker = worker_pid(lines)
    # the step is pushed, then the next model call starts: a stop before that call is
    # cooperative (the worker stays, warm and idle), which is not what this test is for
    wait_pushed(work, "one", 1, lines)
    time.sleep(1)
    assert not gone(worker, 0)
    started = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    took = time.monotonic() - started
    assert proc.returncode == 130, "".join(lines) + err
    assert took < 10, f"exit after {took:.1f} s"
    # its job sat in a 120 s model call, which no cooperative stop reaches: only the
    # force-stop after the grace period (the worker killed) ended it
    assert "[one] → interrupted" not in "".join(lines) + err  # it did not stop by itself
    assert gone(worker, 5)
    # the sub-loop can be resumed: its record still says running
    run_dir = next((work / ".looprun" / "runs").iterdir())
    records = json.loads((run_dir / "subloops.json").read_text())["records"]
    assert records["one"]["outcome"] == "running"


def test_kill_9_of_the_outer_run_then_resume_finishes_without_rerunning(
    tmp_path: Path, ray_address: str
) -> None:
    work, script = _one(tmp_path, delay_s=120)
    proc = start_looprun(
        *scripted_run(str(work / "one.yaml"), intent="abc", workdir=work, script=script),
        "--executor",
        f"ray:{ray_address}",
        cwd=work,
        text=True,
    )
    lines: list[str] = []
    wait_for(proc, r"\[one\] #1 ", lines, 300)
    worker = worker_pid(lines)
    time.sleep(2)
    assert not gone(worker, 0)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert gone(worker, 30)  # the worker ends with its run's board (its owner's actor)
    script.write_text(yaml.safe_dump({"tasks": {"one": step_turns()}}))
    run_id = next((work / ".looprun" / "runs").iterdir()).name
    resumed = looprun(
        "resume", run_id, "--executor", f"ray:{ray_address}", "--json", cwd=work, timeout=600
    )
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["outcome"] == "done"
    sub = work / ".looprun" / "runs" / run_id / "subloops" / "one-1"
    assert _exchanges_per_iteration(sub) == {1: 2, 2: 2, 3: 2}
    assert all((work / f).is_file() for f in ("a.txt", "b.txt", "c.txt"))


def test_the_watchdog_resumes_a_sub_loop_that_stopped_making_progress(
    tmp_path: Path, ray_address: str
) -> None:
    work, script = _one(tmp_path, delay_s=120)
    proc = subprocess.Popen(
        [
            *["python", "-m", "looprun"],
            *scripted_run(str(work / "one.yaml"), intent="abc", workdir=work, script=script),
            *["--executor", f"ray:{ray_address}", "--json"],
        ],
        cwd=work,
        env=cli_env({"LOOPRUN_RAY_WATCHDOG_S": "10"}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    wait_for(proc, r"\[one\] #1 ", lines, 300)
    script.write_text(yaml.safe_dump({"tasks": {"one": step_turns()}}))  # the stuck one is not
    wait_for(proc, r"\[one\] no pushed step for 10 s: cancelling", lines, 120)
    # read here: communicate() reads the pipe itself, past what readline has buffered
    wait_for(proc, r"\[one\] .*resuming from its last pushed step", lines, 60)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, "".join(lines) + err
    assert json.loads(out)["outcome"] == "done"
    sub = next((work / ".looprun" / "runs").iterdir()) / "subloops" / "one-1"
    assert _exchanges_per_iteration(sub) == {1: 2, 2: 2, 3: 2}
