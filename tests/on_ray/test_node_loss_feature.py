"""A ``feature`` run whose parallel sub-loops run on a worker node of a real multi-node
Ray cluster on 127.0.0.1: the node is killed (its raylet and workers, SIGKILL) while
both sub-loops wait in their second step, the run is stopped, and ``looprun resume`` on
the cluster, with a new node, ends done: every check runs again where it must, no step
is played twice and no edit is made twice."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from cluster_helpers import LocalCluster, finish, run_dir_of, start_run
from ray_helpers import pushed_steps, until, wait_for
from tests.support.cli import looprun
from tests.support.git_repos import git_repo

from looprun.journal.read import current_events, read_jsonl

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
TASKS = ("circle", "square")


@pytest.fixture
def cluster() -> Iterator[LocalCluster]:
    c = LocalCluster()
    try:
        yield c
    finally:
        c.close()


def _write(path: str, content: str) -> dict:
    return {"name": "write_file", "arguments": {"path": path, "content": content}}


def _task_turns(
    task: str, fn: str, arg: str, body: str, delay_s: float, slow_check_s: int
) -> list[dict]:
    """Test-first in two steps: a failing test with a stub, then the code, which may
    come after ``delay_s`` and hold each check that imports it for ``slow_check_s``."""
    math = "import math\n\n" if "math." in body else ""
    stub = f"def {fn}({arg}: float) -> float:\n    raise NotImplementedError\n"
    test = (
        f"{math}from shapes.{task} import {fn}\n\n\n"
        f"def test_{fn}():\n    assert {fn}({2}) == {body.replace(arg, '2')}\n"
    )
    imports = "\n".join(
        sorted({*(["import math"] if math else []), *(["import time"] * bool(slow_check_s))})
    )
    top = f"{imports}\n\n" + (f"time.sleep({slow_check_s})\n\n\n" if slow_check_s else "\n")
    code = f"{top if imports else ''}def {fn}({arg}: float) -> float:\n    return {body}\n"
    fix: dict = {"tool_calls": [_write(f"shapes/{task}.py", code)]}
    if delay_s:
        fix["delay_s"] = delay_s
    return [
        {"tool_calls": [_write(f"shapes/{task}.py", stub), _write(f"tests/test_{task}.py", test)]},
        {"text": "The test fails."},
        fix,
        {"text": "Done."},
    ]


def _script(path: Path, delay_s: float, slow_check_s: int = 0) -> None:
    plan = {
        "tasks": [
            {"id": t, "goal": f"Add the {t} area in shapes/{t}.py", "paths": [f"shapes/{t}.py"]}
            for t in TASKS
        ]
    }
    slow = (delay_s, slow_check_s)
    tasks = {
        "circle": _task_turns("circle", "circle_area", "r", "math.pi * r * r", *slow),
        "square": _task_turns("square", "square_area", "side", "side * side", *slow),
    }
    path.write_text(yaml.safe_dump({"turns": [{"text": json.dumps(plan)}], "tasks": tasks}))


def _project(tmp: Path, delay_s: float = 0, slow_check_s: int = 0) -> tuple[Path, Path]:
    work = tmp / "shapes"
    shutil.copytree(
        SAMPLES / "feature_shapes",
        work,
        ignore=shutil.ignore_patterns(".looprun", "script.yaml"),
    )
    git_repo(work)
    script = tmp / "script.yaml"
    _script(script, delay_s, slow_check_s)
    return work, script


def _edits(sub: Path) -> Counter:
    """Each file the sub-loop's journal says it wrote, with how many times it did."""
    events = current_events(read_jsonl(sub / "journal.jsonl"))  # less what was redone
    return Counter(
        (e["iteration"], e["arguments"]["path"])
        for e in events
        if e.get("event") == "tool_call" and e.get("tool") == "write_file"
    )


def _exchanges(sub: Path) -> Counter:
    rows = [json.loads(x) for x in (sub / "exchanges.jsonl").read_text().splitlines()]
    return Counter(r["iteration"] for r in rows if r.get("role", "act") == "act")


def _checks_running(tasks: tuple[str, ...]) -> bool:
    """Whether a check (pytest) of each sub-loop runs now: as many check trees in use as
    sub-loops (each sub-loop's working tree has a check tree of its own)."""
    out = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True).stdout
    roots = {
        found.group(1)
        for line in out.splitlines()
        if line.startswith("python -m pytest") and "-p looprun_outcome" in line
        if (found := re.search(r"--rootdir (\S+)", line))
    }
    return len(roots) >= len(tasks)


@pytest.mark.parametrize("phase", ["model", "check"])
def test_a_feature_run_resumes_to_done_after_its_node_is_killed(
    tmp_path: Path, cluster: LocalCluster, phase: str
) -> None:
    """The node dies while both sub-loops wait on the model in their second step, or
    while that step's check runs."""
    (node,) = cluster.add_nodes(1, cpus=2)  # both parallel sub-loops run there
    slow = {"delay_s": 60} if phase == "model" else {"slow_check_s": 60}
    work, script = _project(tmp_path, **slow)
    intent = (work / "intent.txt").read_text()
    proc = start_run("feature", intent, work, script, cluster.address)
    lines: list[str] = []
    try:
        for task in TASKS:
            if not any(f"[{task}] #1 " in line for line in lines):
                wait_for(proc, rf"\[{task}\] #1 ", lines, 300)
        run_id = run_dir_of(work).name
        # a step's push follows its progress line
        until(lambda: all(pushed_steps(work, run_id, t) == 1 for t in TASKS), lines, 60)
        if phase == "check":
            until(lambda: _checks_running(TASKS), lines, 120)
        cluster.kill(node)
        for task in TASKS:
            if not any(f"[{task}] worker lost" in line for line in lines):
                wait_for(proc, rf"\[{task}\] worker lost", lines, 120)
        os.killpg(proc.pid, signal.SIGINT)  # no node left to run them: the user stops it
        _out, err = finish(proc, 120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    stderr = "".join(lines) + err
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    run_dir = run_dir_of(work)
    records = json.loads((run_dir / "subloops.json").read_text())["records"]
    assert {t: records[t]["outcome"] for t in TASKS} == dict.fromkeys(TASKS, "running"), records

    cluster.add_nodes(1, cpus=2)
    _script(script, delay_s=0)
    resumed = looprun(
        "resume",
        run_dir.name,
        "--executor",
        f"ray:{cluster.address}",
        "--json",
        cwd=work,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["outcome"] == "done", resumed.stderr
    for task in TASKS:
        sub = run_dir / "subloops" / f"{task}-1"
        assert _exchanges(sub) == {1: 2, 2: 2}, (task, _exchanges(sub))  # none replayed
        edits = _edits(sub)
        assert all(n == 1 for n in edits.values()), (task, edits)  # none made twice
        assert (work / "shapes" / f"{task}.py").read_text().count("return") == 1
