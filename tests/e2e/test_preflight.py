"""A check that cannot run stops the run before any token is spent (the real CLI)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from e2e_helpers import git_init, looprun, summary_of

from looprun.loop.preflight import missing_program, program_of

TEMPLATE = """\
looprun: 1
name: preflight
inputs:
  intent: {type: string, required: true}
act:
  prompt: "Task: {{ task.goal }}"
  tools: [write_file]
  constraints: {paths: {allow: ["**"]}}
observe:
  tests:
    run: "RUN_COMMAND"
    parser: exit_code
exit: [tests.ok]
limits: {max_iterations: 6}
"""
WRITE = {"tool_calls": [{"name": "write_file", "arguments": {"path": "v.txt", "content": "x"}}]}


def _run(tmp_path: Path, command: str, turns: int = 6) -> tuple[dict, Path, str]:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".gitignore").write_text(".looprun/\n")
    (repo / "ok.sh").write_text("#!/bin/sh\nexit 0\n")
    (repo / "ok.sh").chmod(0o755)
    (repo / "plain.sh").write_text("#!/bin/sh\nexit 0\n")
    git_init(repo)
    template = tmp_path / "t.yaml"
    template.write_text(TEMPLATE.replace("RUN_COMMAND", command))
    script = tmp_path / "s.yaml"
    script.write_text(json.dumps([WRITE, {"text": "done"}] * turns))
    proc = looprun(
        str(template), "--intent", "x", "--workdir", str(repo),
        "--model", f"script:{script}", "--json",
    )  # fmt: skip
    summary = summary_of(proc)
    assert proc.returncode == summary["exit_code"], proc.stderr
    return summary, Path(summary["run_dir"]), proc.stderr


def _exchanges(run_dir: Path) -> list[str]:
    return [ln for ln in (run_dir / "exchanges.jsonl").read_text().splitlines() if ln.strip()]


@pytest.mark.parametrize(
    "command, program",
    [
        ("pytestx -q", "pytestx was not found on PATH"),
        ("LANG=C FOO='a b' pytestx -q", "pytestx was not found on PATH"),
        ("./missing.sh --fast", "./missing.sh does not exist"),
        ("./plain.sh", "./plain.sh is not executable"),
    ],
)
def test_missing_program_stops_before_any_model_call(
    tmp_path: Path, command: str, program: str
) -> None:
    summary, run_dir, stderr = _run(tmp_path, command)
    assert summary["outcome"] == "error" and summary["exit_code"] == 1
    assert summary["code"] == "observer_cannot_run"
    assert summary["iterations"] == 0
    reason = summary["reason"]
    assert "observer 'tests'" in reason and program in reason
    # the template location of the observer's `run` (line 11, column 10) and the command
    assert f"{tmp_path / 't.yaml'}:11:10" in reason and command in reason
    assert _exchanges(run_dir) == []  # not one model call
    assert summary["usage"]["prompt_tokens"] == 0
    assert "cannot run" in stderr


@pytest.mark.parametrize(
    "command",
    ["./ok.sh", "cd . && python3 -c 'pass'", "python3 -c 'pass' | cat", "true", "FOO=1 ./ok.sh"],
)
def test_commands_that_can_start_or_cannot_be_decided_run(tmp_path: Path, command: str) -> None:
    summary, _, _ = _run(tmp_path, command)
    assert summary["outcome"] == "done", summary


def test_exit_127_during_a_run_stops_instead_of_retrying(tmp_path: Path) -> None:
    # `cd . && ...` is a compound the preflight leaves alone; the shell then says 127
    summary, run_dir, _ = _run(tmp_path, "cd . && pytestx -q")
    assert summary["outcome"] == "error" and summary["code"] == "observer_cannot_run"
    # the baseline observation meets it before any model call, not max_iterations (6) later
    assert summary["iterations"] == 0
    assert "exited 127" in summary["reason"] and "pytestx" in summary["reason"]
    assert len(_exchanges(run_dir)) == 0


def test_exit_126_not_executable_during_a_run(tmp_path: Path) -> None:
    summary, _, _ = _run(tmp_path, "cd . && ./plain.sh")
    assert summary["code"] == "observer_cannot_run" and summary["iterations"] == 0
    assert "exited 126" in summary["reason"]


def test_program_of_decides_only_simple_commands(tmp_path: Path) -> None:
    assert program_of("python -m pytest -q") == "python"
    assert program_of("A=1 B='x y' ruff check .") == "ruff"
    for undecidable in ["cd src && pytest", "(pytest)", "$TOOL run", "echo hi", "", "A=1"]:
        assert program_of(undecidable) is None, undecidable
    assert missing_program("sh -c 'exit 0'", tmp_path) == ""
    assert "not found" in missing_program("no-such-tool-xyz", tmp_path, {"PATH": os.defpath})
