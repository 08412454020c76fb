"""kill -9 at several points of a real run, then `looprun resume`: same outcome, every
edit applied exactly once."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
import yaml
from e2e_helpers import git_init, looprun, run_dirs, start, summary_of

from looprun.journal.read import read_jsonl

FINAL = "start\none\ntwo\nthree\n"

TEMPLATE = """\
looprun: 1
name: stepwise
description: Append three lines, one per iteration, with a slow command in between.
inputs:
  intent: {type: string, required: true}
act:
  prompt: "{{ intent }} (iteration {{ iteration }})"
  tools: [edit_file, run]
  max_steps: 5
  constraints:
    commands:
      allow: ["sleep *"]
observe:
  check:
    run: "python check.py"
    parser: exit_code
exit: [check.ok]
limits: {max_iterations: 6}
"""


def _script(path: Path) -> Path:
    turns = []
    for prev, line in (("start", "one"), ("one", "two"), ("two", "three")):
        turns.append(
            {
                "tool_calls": [
                    {
                        "name": "edit_file",
                        "arguments": {
                            "path": "log.txt",
                            "old": f"{prev}\n",
                            "new": f"{prev}\n{line}\n",
                        },
                    },
                    {"name": "run", "arguments": {"command": "sleep 0.7"}},
                ]
            }
        )
        turns.append({"text": f"added {line}"})
    path.write_text(yaml.safe_dump(turns))
    return path


def _setup(tmp: Path) -> tuple[Path, Path, Path]:
    work = tmp / "work"
    work.mkdir()
    (work / "log.txt").write_text("start\n")
    (work / "check.py").write_text(
        f"import sys\nsys.exit(0 if open('log.txt').read() == {FINAL!r} else 1)\n"
    )
    (work / ".gitignore").write_text(".looprun/\n")
    git_init(work)
    template = tmp / "stepwise.yaml"
    template.write_text(TEMPLATE)
    return work, template, _script(tmp / "script.yaml")


def _args(work: Path, template: Path, script: Path) -> list[str]:
    return [
        str(template),
        "--intent",
        "append the next line",
        "--workdir",
        str(work),
        "--model",
        f"script:{script}",
        "--json",
    ]


def _wait_for(work: Path, predicate, timeout: float = 30) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        runs = work / ".looprun" / "runs"
        if runs.is_dir():
            for d in runs.iterdir():
                if any(predicate(e) for e in read_jsonl(d / "journal.jsonl")):
                    return
        time.sleep(0.02)
    raise AssertionError("the run never reached the kill point")


def _edit_done(n: int):  # type: ignore[no-untyped-def]
    return lambda e: e["event"] == "tool_call" and e["tool"] == "edit_file" and e["iteration"] == n


def _iteration_done(n: int):  # type: ignore[no-untyped-def]
    return lambda e: e["event"] == "iteration" and e["iteration"] == n


KILL_POINTS = {
    "after-plan": lambda e: e["event"] == "plan",
    "mid-iteration-1": _edit_done(1),
    "after-iteration-1": _iteration_done(1),
    "mid-iteration-2": _edit_done(2),
    "mid-iteration-3": _edit_done(3),
}


def test_uninterrupted_reference(tmp_path: Path) -> None:
    work, template, script = _setup(tmp_path)
    proc = looprun(*_args(work, template, script))
    assert proc.returncode == 0, proc.stderr
    assert summary_of(proc)["iterations"] == 3
    assert (work / "log.txt").read_text() == FINAL


@pytest.mark.parametrize(
    "point",
    [p if p == "mid-iteration-2" else pytest.param(p, marks=pytest.mark.slow) for p in KILL_POINTS],
)
def test_kill_9_then_resume_reaches_the_same_outcome(point: str, tmp_path: Path) -> None:
    work, template, script = _setup(tmp_path)
    proc = start(*_args(work, template, script))
    try:
        _wait_for(work, KILL_POINTS[point])
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    [run_dir] = run_dirs(work)
    assert not (run_dir / "summary.json").exists()
    listed = json.loads(looprun("runs", "--workdir", str(work), "--json").stdout)
    assert listed[0]["outcome"] == "interrupted"
    resumed = looprun("resume", run_dir.name, "--workdir", str(work), "--json")
    assert resumed.returncode == 0, resumed.stderr
    summary = summary_of(resumed)
    assert (summary["outcome"], summary["iterations"]) == ("done", 3)
    assert (work / "log.txt").read_text() == FINAL  # no edit lost, none applied twice
    events = list(read_jsonl(run_dir / "journal.jsonl"))
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert any(e["event"] == "resumed" for e in events)
    again = looprun("resume", run_dir.name, "--workdir", str(work))
    assert again.returncode == 2 and "already ended done" in again.stderr


def test_torn_last_journal_line_is_tolerated(tmp_path: Path) -> None:
    work, template, script = _setup(tmp_path)
    proc = start(*_args(work, template, script))
    try:
        _wait_for(work, _iteration_done(1))
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    [run_dir] = run_dirs(work)
    with open(run_dir / "journal.jsonl", "a") as fh:
        fh.write('{"seq": 99, "event": "tool_ca')  # a write cut short by the crash
    resumed = looprun("resume", run_dir.name, "--workdir", str(work), "--json")
    assert resumed.returncode == 0, resumed.stderr
    lines = (run_dir / "journal.jsonl").read_text().splitlines()
    assert all(json.loads(line) for line in lines)  # the torn line was cut, not kept
    assert (work / "log.txt").read_text() == FINAL
