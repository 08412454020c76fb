"""The real opencode binary as the actor, against a loopback server speaking OpenAI Chat
Completions (streamed), reached through the OpenAI-compatible provider bundled in the
binary: its own tools make the edits, its permission rules come from the template, and
looprun's checks decide."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.e2e_helpers import sample_copy
from tests.support.agent_clis import require, two_turns_of_one_session
from tests.support.agent_server import AgentScript, call, say
from tests.support.fake_provider import FakeProvider
from tests.support.invoice_bug import (
    CLAIM,
    NEW,
    OLD,
    REPRO_TEST,
    WRITES_THE_TEST,
    assert_denied_command_retried,
    journal_of,
    run_sample,
)

# a real agent CLI from npm or PyPI: the e2e tier (`pytest -m e2e`)
pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "samples" / "agents" / "bugfix-opencode.yaml"
SECRET = "sk-opencode-loopback-secret-93d1"


@pytest.fixture(scope="module")
def opencode_bin() -> str:
    return require("opencode")


def _run(work: Path, script: AgentScript, bindir: str, *args: str) -> tuple[Any, dict]:
    def server_env(server: FakeProvider) -> dict[str, str]:
        return {"OPENAI_API_KEY": SECRET, "LOOPRUN_OPENCODE_BASE_URL": server.url + "/v1"}

    return run_sample(TEMPLATE, work, script, server_env, *args, bindir=bindir)


def test_opencode_fixes_the_invoice_bug_and_the_checks_decide(
    tmp_path: Path, opencode_bin: str
) -> None:
    work = sample_copy("invoice", tmp_path)
    test_file = work / "tests" / "test_cancelled_lines.py"
    totals = work / "invoice" / "totals.py"
    script = AgentScript(
        [
            # iteration 1, reproduce: opencode's write tool (its edit permission)
            call("write", {"filePath": str(test_file), "content": REPRO_TEST}),
            say("I added a failing test."),
            # iteration 2, fix: read, edit, then an allowed command
            call("read", {"filePath": str(totals)}),
            call("edit", {"filePath": str(totals), "oldString": OLD, "newString": NEW}),
            call("bash", {"command": "python -m pytest -q", "description": "run the tests"}),
            say("Fixed: zero units give an average of 0."),
        ],
        model="gpt-4.1",
    )
    proc, summary = _run(work, script, opencode_bin, "--model", "openai:gpt-4.1")
    assert summary["outcome"] == "done", proc.stderr
    assert [t["id"] for t in summary["tasks"]] == ["reproduce", "fix"]
    assert summary["iterations"] == 2
    # the edits are opencode's, made with its own tools in the working tree
    assert test_file.read_text() == REPRO_TEST
    assert "if units == 0:" in totals.read_text()
    # the model named on the command line, the key on every main-loop request
    assert {r.json()["model"] for r in script.main} == {"gpt-4.1"}
    assert all(r.headers.get("authorization") == f"Bearer {SECRET}" for r in script.main)
    run, events = journal_of(work)
    turns = [e for e in events if e["event"] == "agent_turn"]
    assert [t["tools"] for t in turns] == [["write"], ["read", "edit", "bash"]]
    assert all(t["exit_code"] == 0 and t["error"] == "" and t["denials"] == 0 for t in turns)
    # per call: two and four streamed replies of 120 input tokens each
    assert [t["prompt_tokens"] for t in turns] == [240, 480]
    raw = (run / "kept" / str(turns[1]["iteration"]) / turns[1]["artifact"]).read_text()
    assert '"tool":"bash"' in raw and '"status":"completed"' in raw
    for path in run.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path
    # nothing of opencode's own lands in the repository, and nothing was fetched from npm
    assert not (work / ".opencode").exists() and not (work / "opencode.json").exists()
    home = run / "agent-home"
    assert not list((home / ".config" / "opencode" / "node_modules").iterdir())
    config = json.loads((home / "opencode.json").read_text())
    assert config["permission"]["*"] == "deny"
    assert config["permission"]["bash"] == {
        "*": "deny",
        "python -m pytest *": "allow",
        "python -m pytest": "allow",
        "ruff check *": "allow",
    }


def test_a_denied_command_ends_as_a_retry_never_as_done(tmp_path: Path, opencode_bin: str) -> None:
    work = sample_copy("invoice", tmp_path)
    script = AgentScript(
        [
            call("bash", {"command": WRITES_THE_TEST, "description": "write the test"}),
            say(CLAIM),
        ],
        model="gpt-4.1",
    )
    proc, summary = _run(
        work, script, opencode_bin, "--model", "openai:gpt-4.1", "--max-iterations", "1"
    )
    assert_denied_command_retried(work, summary, proc.stderr, "bash(python3 -c")


def test_a_resumed_session_continues_and_is_charged_per_call(
    tmp_path: Path, opencode_bin: str
) -> None:
    script = AgentScript([say("one"), say("two")], model="gpt-4.1")
    with FakeProvider(script) as server:
        path = os.pathsep.join((opencode_bin, os.environ["PATH"]))
        env = {
            "PATH": path,
            "OPENAI_API_KEY": SECRET,
            "LOOPRUN_OPENCODE_BASE_URL": server.url + "/v1",
        }
        first, second = two_turns_of_one_session("opencode", "openai/gpt-4.1", env, tmp_path)
    assert (first.error, second.error) == ("", ""), (first, second)
    assert second.session_id == first.session_id and second.final_message == "two"
    # the second call carried the first exchange: the session was continued
    first_len, second_len = (len(r.json()["messages"]) for r in script.main)
    assert second_len == first_len + 2
    # each run reports its own calls: 120 prompt tokens each, 240 for the session
    assert (first.prompt_tokens, second.prompt_tokens) == (120, 120)
    assert second.session_usage["prompt_tokens"] == 240
