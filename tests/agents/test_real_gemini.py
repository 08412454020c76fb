"""The real Gemini CLI as the actor, against a loopback server speaking the Gemini API's
streamGenerateContent (SSE): its own tools make the edits, the admin policy looprun writes
from the template decides what it may do, and looprun's checks decide done."""

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
TEMPLATE = REPO / "samples" / "agents" / "bugfix-gemini.yaml"
SECRET = "AIza-gemini-loopback-secret-4b7e"


@pytest.fixture(scope="module")
def gemini_bin() -> str:
    return require("gemini")


def _run(work: Path, script: AgentScript, bindir: str, *args: str) -> tuple[Any, dict]:
    def server_env(server: FakeProvider) -> dict[str, str]:
        return {"GEMINI_API_KEY": SECRET, "GOOGLE_GEMINI_BASE_URL": server.url}

    return run_sample(TEMPLATE, work, script, server_env, *args, bindir=bindir)


def test_gemini_fixes_the_invoice_bug_and_the_checks_decide(
    tmp_path: Path, gemini_bin: str
) -> None:
    work = sample_copy("invoice", tmp_path)
    test_file = work / "tests" / "test_cancelled_lines.py"
    totals = work / "invoice" / "totals.py"
    script = AgentScript(
        [
            # iteration 1, reproduce
            call("write_file", {"file_path": str(test_file), "content": REPRO_TEST}),
            say("I added a failing test."),
            # iteration 2, fix: read, replace, then a command the template allows
            call("read_file", {"file_path": str(totals)}),
            call(
                "replace",
                {
                    "file_path": str(totals),
                    "old_string": OLD,
                    "new_string": NEW,
                    "instruction": "fix",
                },
            ),
            call("run_shell_command", {"command": "python -m pytest -q", "description": "tests"}),
            say("Fixed: zero units give an average of 0."),
        ],
        model="gemini-2.5-pro",
    )
    proc, summary = _run(work, script, gemini_bin, "--model", "gemini:gemini-2.5-pro")
    assert summary["outcome"] == "done", proc.stderr
    assert [t["id"] for t in summary["tasks"]] == ["reproduce", "fix"]
    assert summary["iterations"] == 2
    # the edits are Gemini CLI's, made with its own tools in the working tree
    assert test_file.read_text() == REPRO_TEST
    assert "if units == 0:" in totals.read_text()
    # the model named on the command line (in the path), the key on every request
    assert {r.path.split("?")[0] for r in script.main} == {
        "/v1beta/models/gemini-2.5-pro:streamGenerateContent"
    }
    assert all(r.headers.get("x-goog-api-key") == SECRET for r in script.main)
    run, events = journal_of(work)
    turns = [e for e in events if e["event"] == "agent_turn"]
    assert [t["tools"] for t in turns] == [
        ["write_file"],
        ["read_file", "replace", "run_shell_command"],
    ]
    assert all(t["exit_code"] == 0 and t["error"] == "" and t["denials"] == 0 for t in turns)
    # per call: two and four streamed replies of 120 input tokens each
    assert [t["prompt_tokens"] for t in turns] == [240, 480]
    # Gemini CLI reports no cost: the price table prices its tokens (1.25 / 10 USD per 1M)
    usage = summary["usage"]
    expected = (usage["prompt_tokens"] * 1.25 + usage["completion_tokens"] * 10.0) / 1e6
    assert usage["prompt_tokens"] >= 720 and usage["cost_usd"] == pytest.approx(expected)
    raw = (run / "kept" / str(turns[1]["iteration"]) / turns[1]["artifact"]).read_text()
    assert '"tool_name":"run_shell_command"' in raw and "passed" in raw
    for path in run.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path
    # its home and settings live under the run, none in the repository
    assert not (work / ".gemini").exists()
    home = run / "agent-home"
    settings = json.loads((home / ".gemini" / "settings.json").read_text())
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert settings["model"]["maxSessionTurns"] == 30


def test_a_denied_command_ends_as_a_retry_never_as_done(tmp_path: Path, gemini_bin: str) -> None:
    work = sample_copy("invoice", tmp_path)
    script = AgentScript(
        [
            call("run_shell_command", {"command": WRITES_THE_TEST, "description": "write"}),
            say(CLAIM),
        ],
        model="gemini-2.5-pro",
    )
    proc, summary = _run(
        work, script, gemini_bin, "--model", "gemini:gemini-2.5-pro", "--max-iterations", "1"
    )
    assert_denied_command_retried(work, summary, proc.stderr, "run_shell_command(python3 -c")


def test_a_resumed_session_continues_and_is_charged_per_call(
    tmp_path: Path, gemini_bin: str
) -> None:
    script = AgentScript([say("one"), say("two")], model="gemini-2.5-pro")
    with FakeProvider(script) as server:
        path = os.pathsep.join((gemini_bin, os.environ["PATH"]))
        env = {"PATH": path, "GEMINI_API_KEY": SECRET, "GOOGLE_GEMINI_BASE_URL": server.url}
        first, second = two_turns_of_one_session("gemini", "gemini-2.5-pro", env, tmp_path)
    assert (first.error, second.error) == ("", ""), (first, second)
    assert second.session_id == first.session_id and second.final_message == "two"
    # the second call carried the first exchange: the session was continued
    first_len, second_len = (len(r.json()["contents"]) for r in script.main)
    assert second_len == first_len + 2
    # each run reports its own calls: 120 prompt tokens each, 240 for the session
    assert (first.prompt_tokens, second.prompt_tokens) == (120, 120)
    assert second.session_usage["prompt_tokens"] == 240
