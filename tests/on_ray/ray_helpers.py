"""Helpers of the Ray tests."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable, Collection
from pathlib import Path

import yaml
from cluster_helpers import run_dir_of
from tests.remote.remote_helpers import STEPS, step_turns
from tests.support.git_repos import git_repo

# an outer loop of one task whose sub-loop is ./steps.yaml (three steps, one file each)
ONE = """\
looprun: 1
name: one
inputs:
  intent: {type: string, required: true}
plan:
  mode: static
  tasks:
    - {id: one, goal: "write a, b and c"}
each_task:
  uses: ./steps.yaml
  with: {intent: "{{ task.goal }}"}
  isolation: worktree
  parallel: 1
exit: ["subloops.all_done"]
refine:
  - else: {escalate: "the sub-loop did not finish"}
limits: {max_iterations: 1}
"""


def one_task_project(tmp: Path, delay_s: float = 0.0) -> tuple[Path, Path]:
    """A git project holding ONE and its sub-loop, and the script that plays the steps."""
    work = tmp / "proj"
    work.mkdir()
    (work / "steps.yaml").write_text(STEPS)
    (work / "one.yaml").write_text(ONE)
    git_repo(work)
    script = tmp / "script.yaml"
    script.write_text(yaml.safe_dump({"tasks": {"one": step_turns(delay_s)}}))
    return work, script


def busy_workers(among: Collection[int]) -> list[str]:
    """The Ray workers of ``among`` (a run's, as its progress names them: other tests'
    clusters run beside this one) whose title names a sub-loop job (Ray titles a worker
    after the call it runs: a warm worker's title can show a progress poll instead while
    a job runs, so to follow one job use ``worker_pid`` and ``gone``)."""
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [
        line
        for line in out.splitlines()
        if re.search(r"ray::(\w+\.)?execute", line) and int(line.split()[0]) in among
    ]


# a sub-loop's progress line naming its worker: "[TASK] worker ID on HOST pid N"
_WORKER_LINE = r"\[{task}\] worker \w+ on \S+ pid (\d+)"


def run_workers(stderr: str) -> set[int]:
    """The pids of every worker a run's progress says its sub-loops ran on."""
    return {int(pid) for pid in re.findall(_WORKER_LINE.format(task=r"[^\]]+"), stderr)}


def worker_pid(lines: list[str], task: str = "one") -> int:
    """The pid of the worker process a sub-loop's progress says it runs on."""
    line_of = _WORKER_LINE.format(task=re.escape(task))
    found = [re.search(line_of, line) for line in lines]
    pids = [int(m.group(1)) for m in found if m]
    assert pids, "no worker line in:\n" + "".join(lines)
    return pids[-1]


def gone(pid: int, within_s: float) -> bool:
    """Whether process ``pid`` ends (or is a zombie) within ``within_s`` seconds."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.2)
    return False


def pushed_steps(work: Path, run_id: str, task: str) -> int:
    """How many steps of the sub-loop its workers pushed (its journal ref's record): a
    worker pushes each step before it starts the next one's model call."""
    ref = f"refs/looprun-sync/{run_id}.{task}-1/journal:journal.jsonl"
    shown = subprocess.run(["git", "show", ref], cwd=work, capture_output=True, text=True)
    events = [json.loads(x) for x in shown.stdout.splitlines() if x.strip()]
    return max((e["iteration"] for e in events if e.get("event") == "iteration"), default=0)


def until(ok: Callable[[], bool], lines: list[str], timeout: float) -> None:
    """Wait for ``ok()``; on timeout, fail showing the run's progress ``lines``."""
    deadline = time.monotonic() + timeout
    while not ok():
        assert time.monotonic() < deadline, "".join(lines)
        time.sleep(0.5)


def wait_pushed(work: Path, task: str, steps: int, lines: list[str], timeout: float = 120) -> None:
    """Wait until sub-loop ``task`` of the one run in ``work`` has pushed ``steps`` steps
    (its progress line for a step comes before the step's push)."""
    run_id = run_dir_of(work).name
    until(lambda: pushed_steps(work, run_id, task) >= steps, lines, timeout)


def wait_for(proc: subprocess.Popen, pattern: str, lines: list[str], timeout: float) -> re.Match:
    """Read stderr lines until one matches; returns the match (the lines read are kept)."""
    assert proc.stderr is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        found = re.search(pattern, line)
        if found:
            return found
    raise AssertionError(f"no line matching {pattern!r} in:\n{''.join(lines)}")


HOLD = """\
import sys, time
from pathlib import Path

here, holds = Path(sys.argv[1]), int(sys.argv[2])
run = len(list(here.glob("check-*"))) + 1
(here / f"check-{run}").write_text("")
if run == holds:  # the test acts (freezes the head, looks) while this run waits
    (here / "ready").write_text("")
    deadline = time.monotonic() + 300
    while not (here / "frozen").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
"""


def held_project(tmp_path: Path, holds: int) -> tuple[Path, Path, Path]:
    """ONE with a check of the outer loop's own, whose ``holds``-th run waits for the
    test (1: the baseline, before the sub-loop; 2: after it)."""
    work, script = one_task_project(tmp_path)
    signals = tmp_path / "signals"
    signals.mkdir()
    (tmp_path / "hold.py").write_text(HOLD)
    checked = ONE.replace(
        'exit: ["subloops.all_done"]',
        f"sandbox: off\nobserve:\n  held:\n"
        f"    run: python3 {tmp_path / 'hold.py'} {signals} {holds}\n"
        '    parser: exit_code\nexit: ["subloops.all_done", "held.ok"]',
    )
    (work / "one.yaml").write_text(checked)
    subprocess.run(["git", "commit", "-qam", "a check of the outer loop"], cwd=work, check=True)
    return work, script, signals
