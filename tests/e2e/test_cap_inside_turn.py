"""A cap that trips inside an act turn still ends that iteration on the record.

The real CLI runs a scripted model on a real git repository whose one test fails until
``add`` adds. A per-tool, token or wall-clock cap stops the run in the middle of the
model's turn; the iteration is counted, ``observe/1.json`` says where things stand and
the run ends ``exhausted`` with the cap's reason, even when the checks pass.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import jsonschema
from e2e_helpers import git_init, looprun, run_dirs

from looprun.system.resources import schemas_dir

TEMPLATE = """\
looprun: 1
name: capped
inputs:
  intent: {{type: string, required: true}}
plan: {{mode: none}}
act:
  prompt: "{{{{ intent }}}}"
  tools: [read_file, write_file, edit_file, run]
  constraints:
    paths: {{allow: ["src/**", "tests/**"]}}
    commands: {{allow: ["python -m pytest *", "sleep *"]}}
observe:
  tests:
    run: "python -m pytest -q -p no:cacheprovider --junitxml={{{{ run.artifacts }}}}/junit.xml"
    parser: junit
    file: "{{{{ run.artifacts }}}}/junit.xml"
    timeout: 60s
exit: [tests.ok]
refine:
  - else: {{retry: "{{{{ tests.feedback }}}}"}}
limits: {limits}
"""

PYTEST = "python -m pytest -q -p no:cacheprovider"


def edit(new: str) -> dict[str, Any]:
    return {"name": "edit_file", "arguments": {"path": "src/calc.py", "old": "a - b", "new": new}}


def run_tool(command: str) -> dict[str, Any]:
    return {"name": "run", "arguments": {"command": command}}


def setup(tmp: Path, limits: str, script: list[dict[str, Any]]) -> tuple[Path, list[str]]:
    repo = tmp / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "src" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "tests" / "test_calc.py").write_text(
        "import pathlib\nimport sys\n\n"
        "sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / 'src'))\n"
        "from calc import add  # noqa: E402\n\n\n"
        "def test_add():\n    assert add(2, 3) == 5\n"
    )
    git_init(repo)
    template = tmp / "capped.yaml"
    template.write_text(TEMPLATE.format(limits=limits))
    script_file = tmp / "script.json"  # JSON is YAML
    script_file.write_text(json.dumps(script))
    args = [str(template), "--intent", "add() must add", "--workdir", str(repo)]
    return repo, [*args, "--model", f"script:{script_file}", "--json"]


def events_of(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "journal.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines if line.strip()]
    schema = json.loads((schemas_dir() / "journal-event.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    for event in events:
        validator.validate(event)
    return events


def limit_row(record: dict[str, Any], name: str) -> dict[str, Any]:
    return next(row for row in record["limits"] if row["limit"] == name)


def assert_final(repo: Path, summary: dict[str, Any], code: str) -> Path:
    """Exhausted with the cap's reason after one counted iteration, and not resumable."""
    assert (summary["outcome"], summary["code"], summary["exit_code"]) == ("exhausted", code, 3)
    assert summary["iterations"] == 1
    assert [(t["id"], t["outcome"]) for t in summary["tasks"]] == [("main", "exhausted")]
    assert summary["state"]["changed_files"] == ["src/calc.py"]  # the changes stay
    (run_dir,) = run_dirs(repo)
    refused = looprun("resume", run_dir.name, "--workdir", str(repo))
    assert refused.returncode == 2 and "already ended exhausted" in refused.stderr
    return run_dir


def test_per_tool_cap_mid_turn_records_the_iteration_and_never_reports_success(
    tmp_path: Path,
) -> None:
    # the fix is right, then the model asks for one `run` too many in the same turn
    script = [{"tool_calls": [edit("a + b"), run_tool(PYTEST)]}, {"tool_calls": [run_tool(PYTEST)]}]
    repo, args = setup(tmp_path, "{max_iterations: 3, per_tool: {run: 1}}", script)
    proc = looprun(*args)
    assert proc.returncode == 3, proc.stderr
    summary = json.loads(proc.stdout)
    run_dir = assert_final(repo, summary, "per_tool.run")
    assert summary["reason"] == "per_tool limit for run reached (1 calls)"
    assert "return a + b" in (repo / "src" / "calc.py").read_text()

    record = json.loads((run_dir / "observe" / "1.json").read_text())
    assert record["tools"] == ["edit_file", "run"]
    assert record["observers"]["tests"]["ran"] and record["observers"]["tests"]["passed"] == 1
    assert record["exit"] == [{"condition": "tests.ok", "value": True}]
    assert limit_row(record, "per_tool.run") == {"limit": "per_tool.run", "current": 1, "max": 1}
    assert limit_row(record, "max_iterations")["current"] == 1
    assert record["next"] == {
        "outcome": "exhausted",
        "reason": "per_tool limit for run reached (1 calls)",
        "code": "per_tool.run",
    }

    events = events_of(run_dir)
    (iteration,) = [e for e in events if e["event"] == "iteration"]
    assert iteration["exit_ok"] is True and iteration["stop"]["code"] == "per_tool.run"
    assert not [e for e in events if e["event"] == "task_done"]  # the task did not finish
    (finished,) = [e for e in events if e["event"] == "run_finished"]
    assert (finished["outcome"], finished["iterations"]) == ("exhausted", 1)
    assert "#1 main: edit_file×1, run×1 → tests: ok → exhausted" in proc.stderr
    assert "→ exhausted after 1 iteration(s): per_tool limit" in proc.stderr


def test_token_cap_mid_turn_runs_the_checks_once_and_keeps_the_failure(tmp_path: Path) -> None:
    # a wrong fix and a test run: the next request in the turn cannot be funded
    script = [{"tool_calls": [edit("a * b"), run_tool(PYTEST)]}, {"text": "unreachable"}]
    repo, args = setup(tmp_path, "{max_iterations: 3, max_tokens: 200}", script)
    proc = looprun(*args)
    assert proc.returncode == 3, proc.stderr
    summary = json.loads(proc.stdout)
    run_dir = assert_final(repo, summary, "max_tokens")
    assert "test_add" in summary["state"]["last_failure"]

    record = json.loads((run_dir / "observe" / "1.json").read_text())
    tests = record["observers"]["tests"]
    assert (tests["ran"], tests["ok"], tests["failed"]) == (True, False, 1)
    assert record["exit"] == [{"condition": "tests.ok", "value": False}]
    tokens = limit_row(record, "max_tokens")
    assert tokens["max"] == 200 and 0 < tokens["current"] <= 200
    assert record["next"]["code"] == "max_tokens"

    events = events_of(run_dir)
    assert [e["code"] for e in events if e["event"] == "limit"] == ["max_tokens"]
    (iteration,) = [e for e in events if e["event"] == "iteration"]
    assert iteration["exit_ok"] is False and iteration["stop"]["code"] == "max_tokens"
    assert "#1 main: edit_file×1, run×1 → tests: FAILED (1 tests, 1 failed: " in proc.stderr
    assert "→ exhausted after 1 iteration(s): max_tokens: " in proc.stderr


def test_timeout_mid_turn_records_the_iteration_without_running_the_checks(
    tmp_path: Path,
) -> None:
    script = [{"tool_calls": [edit("a * b"), run_tool("sleep 30")]}, {"text": "unreachable"}]
    repo, args = setup(tmp_path, "{max_iterations: 3, timeout: 3s}", script)
    started = time.monotonic()
    proc = looprun(*args)
    assert time.monotonic() - started < 25  # the hung tool was stopped at the deadline
    assert proc.returncode == 3, proc.stderr
    summary = json.loads(proc.stdout)
    run_dir = assert_final(repo, summary, "timeout")
    assert summary["reason"].startswith("timeout reached")

    record = json.loads((run_dir / "observe" / "1.json").read_text())
    tests = record["observers"]["tests"]
    assert (tests["ran"], tests["ok"]) == (False, False)
    assert tests["error"].startswith("not run: timeout reached")
    # the check ran once, for the baseline, and never in the timed-out iteration
    (baseline,) = [e for e in events_of(run_dir) if e["event"] == "baseline"]
    assert baseline["seq"] < min(e["seq"] for e in events_of(run_dir) if e["event"] == "iteration")
    assert proc.stderr.count("tests: ") == 2, proc.stderr  # the baseline line and iteration 1
    assert limit_row(record, "timeout")["max"] == 3
    assert record["next"]["code"] == "timeout"

    events = events_of(run_dir)
    (iteration,) = [e for e in events if e["event"] == "iteration"]
    assert iteration["observers"] == {"tests": "tests: not run"}
    assert iteration["stop"]["code"] == "timeout"
    assert "#1 main: edit_file×1, run×1 → tests: not run → exhausted" in proc.stderr
