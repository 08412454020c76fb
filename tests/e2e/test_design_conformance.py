"""The design's testable claims about stopping, caps and observability, through the real
CLI in a subprocess: a real git repository, a scripted model, real check commands."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from e2e_helpers import git_init, looprun

CHECK = (
    "python3 -c \"import sys; sys.exit(0 if open('value.txt').read().strip() == 'good' else 1)\""
)


def _template(limits: str, check: str = CHECK) -> str:
    return f"""\
looprun: 1
name: conformance
inputs:
  intent: {{type: string, required: true}}
plan: {{mode: none}}
act:
  prompt: "Task: {{{{ task.goal }}}}"
  tools: [read_file, write_file, run]
  constraints:
    paths: {{allow: ["**"]}}
    commands: {{allow: ["python3 *", "echo *"]}}
observe:
  check:
    run: {json.dumps(check)}
    parser: exit_code
exit: [check.ok]
limits: {limits}
"""


def _write(path: str, content: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": content}}]}


def _repo(tmp_path: Path, limits: str, turns: list[Any], check: str = CHECK) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / "value.txt").write_text("bad\n")
    (work / "check.py").write_text(
        "import datetime, sys, tempfile, time\n"
        "where = tempfile.mkdtemp()\n"
        "print('checking', open('value.txt').read().strip())\n"
        "print(f'AssertionError: not good in {where}/v.txt at {time.time()} '\n"
        "      f'({datetime.datetime.now().isoformat()}, object at 0x{id(where):x})')\n"
        "sys.exit(1)\n"
    )
    git_init(work)
    (tmp_path / "t.yaml").write_text(_template(limits, check))
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(turns))
    return work


def _run(
    tmp_path: Path, work: Path, *extra: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    proc = looprun(
        *extra,
        str(tmp_path / "t.yaml"),
        "--intent",
        "make value.txt good",
        "--workdir",
        str(work),
        "--model",
        f"script:{tmp_path / 'script.yaml'}",
        "--json",
    )
    assert proc.stdout.strip(), proc.stderr
    return proc, json.loads(proc.stdout)


def _observe(summary: dict[str, Any], n: int) -> dict[str, Any]:
    return json.loads((Path(summary["run_dir"]) / "observe" / f"{n}.json").read_text())


def _events(summary: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    lines = (Path(summary["run_dir"]) / "journal.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == kind]


THREE_ATTEMPTS = [
    _write("value.txt", "worse\n"),
    {"text": "Done, the task is complete."},
    _write("value.txt", "still bad\n"),
    {"text": "Done."},
    _write("value.txt", "good\n"),
    {"text": "Done."},
]


def test_checks_holding_on_the_last_allowed_iteration_is_done(tmp_path: Path) -> None:
    work = _repo(tmp_path, "{max_iterations: 3}", THREE_ATTEMPTS)
    proc, summary = _run(tmp_path, work)
    assert (proc.returncode, summary["outcome"], summary["iterations"]) == (0, "done", 3)
    last = _observe(summary, 3)
    assert last["task_iteration"] == 3  # the completing iteration, not the reset counter
    assert last["next"]["action"] == "done"
    assert {"limit": "max_iterations", "current": 3, "max": 3} in last["limits"]


def test_a_run_one_iteration_short_is_exhausted_never_done(tmp_path: Path) -> None:
    work = _repo(tmp_path, "{max_iterations: 2}", THREE_ATTEMPTS)
    proc, summary = _run(tmp_path, work)
    assert (proc.returncode, summary["outcome"], summary["code"]) == (
        3,
        "exhausted",
        "max_iterations",
    )
    assert summary["iterations"] == 2
    assert not (Path(summary["run_dir"]) / "observe" / "3.json").exists()
    # could not complete, with its state: the change stays and the last failure is named
    assert (work / "value.txt").read_text() == "still bad\n"
    assert summary["state"]["changed_files"] == ["value.txt"]
    assert "exited 1" in summary["state"]["last_failure"]


def test_saying_done_or_calling_no_tool_never_ends_a_loop(tmp_path: Path) -> None:
    turns = [{"text": "All done! The bug is fixed."}] * 3
    # no-progress detection off, so only the iteration cap can stop it
    work = _repo(tmp_path, "{max_iterations: 3, max_repeats: false}", turns)
    proc, summary = _run(tmp_path, work)
    assert (proc.returncode, summary["outcome"], summary["iterations"]) == (3, "exhausted", 3)


def test_per_tool_cap_allows_exactly_that_many_calls(tmp_path: Path) -> None:
    calls = [{"name": "run", "arguments": {"command": f"echo call{i}"}} for i in (1, 2, 3)]
    work = _repo(tmp_path, "{max_iterations: 5, per_tool: {run: 2}}", [{"tool_calls": calls}])
    proc, summary = _run(tmp_path, work)
    assert (proc.returncode, summary["code"]) == (3, "per_tool.run")
    ran = [e["arguments"]["command"] for e in _events(summary, "tool_call") if e["tool"] == "run"]
    assert ran == ["echo call1", "echo call2"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie waiting for its (already gone) parent to be reaped is not running
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


def test_a_timeout_mid_tool_kills_the_process_group_and_keeps_the_changes(
    tmp_path: Path,
) -> None:
    pidfile = tmp_path / "grandchild.pid"
    hang = (
        "import subprocess, time\n"
        f"child = subprocess.Popen([{sys.executable!r}, '-c', 'import time; time.sleep(300)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(300)\n"
    )
    turns = [
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "hang.py", "content": hang}},
                {"name": "write_file", "arguments": {"path": "value.txt", "content": "half\n"}},
                {"name": "run", "arguments": {"command": "python3 hang.py"}},
            ]
        },
        {"text": "done"},
    ]
    work = _repo(tmp_path, "{max_iterations: 3, timeout: 3s}", turns)
    started = time.monotonic()
    # unconfined: the process group is what stops it here (the pid file is outside the
    # workdir, and host pids are what it records); tests/security/test_sandbox.py checks
    # the same timeout inside the sandbox
    proc, summary = _run(tmp_path, work, "run", "--sandbox", "off")
    assert time.monotonic() - started < 30
    assert (proc.returncode, summary["code"]) == (3, "timeout")
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 3
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(grandchild):  # do not leave it behind, then fail
        os.kill(grandchild, signal.SIGKILL)
        raise AssertionError("the command's child outlived the timeout")
    assert (work / "value.txt").read_text() == "half\n"
    assert sorted(summary["state"]["changed_files"]) == ["hang.py", "value.txt"]
    assert "+half" in summary["state"]["diff"]


def test_the_same_failure_with_different_noise_counts_as_a_repeat(tmp_path: Path) -> None:
    """Each run of check.py prints a new temp path, Unix time, ISO timestamp and address."""
    turns = [_write("value.txt", "worse\n"), {"text": "done"}] * 3
    work = _repo(tmp_path, "{max_iterations: 5, max_repeats: 2}", turns, check="python3 check.py")
    proc, summary = _run(tmp_path, work)
    assert (proc.returncode, summary["outcome"], summary["iterations"]) == (4, "stalled", 2)
    first, second = _observe(summary, 1), _observe(summary, 2)
    tails = [o["observers"]["check"]["output_tail"] for o in (first, second)]
    assert tails[0] != tails[1]  # the noise really differed
    assert first["progress"]["fingerprint"] == second["progress"]["fingerprint"]
    assert {"limit": "max_repeats", "current": 2, "max": 2} in second["limits"]
    assert {"limit": "max_repeats", "current": 1, "max": 2} in first["limits"]


def test_each_iteration_leaves_one_structured_observation(tmp_path: Path) -> None:
    work = _repo(tmp_path, "{max_iterations: 3}", THREE_ATTEMPTS)
    _, summary = _run(tmp_path, work)
    files = sorted(p.name for p in (Path(summary["run_dir"]) / "observe").iterdir())
    assert files == ["0.json", "1.json", "2.json", "3.json"]  # 0: the baseline
    baseline = _observe(summary, 0)
    assert baseline["baseline"] is True and baseline["observers"]["check"]["ok"] is False
    record = _observe(summary, 1)
    assert record["intent"] == "make value.txt good"
    assert record["task"]["id"] == "main"
    assert record["exit"] == [{"condition": "check.ok", "value": False}]
    assert record["observers"]["check"]["ok"] is False
    assert {r["limit"] for r in record["limits"]} == {
        "max_iterations",
        "max_tokens",
        "max_cost_usd",
        "timeout",
        "max_repeats",  # on by default
    }
    assert record["progress"]["repeats"] == 1
    assert record["policy"]["violations"] == 0
    assert record["next"]["action"] == "retry"
