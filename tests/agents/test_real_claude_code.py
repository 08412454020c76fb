"""The real Claude Code binary as the actor, against a loopback Anthropic Messages server.

The server plays scripted model replies (streamed, as the real API does); Claude Code
executes them - its own tools make the edits in the run's tree - and looprun runs the
real checks and decides. Done comes from the tests, never from what Claude Code says.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.e2e.e2e_helpers import run_dirs, sample_copy
from tests.support.agent_clis import require
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
TEMPLATE = REPO / "samples" / "agents" / "bugfix-claude-code.yaml"
SECRET = "sk-ant-loopback-secret-7f3a9c"


def _run(work: Path, script: AgentScript, bindir: str, *args: str) -> tuple[Any, dict]:
    """looprun with the sample template, Claude Code talking to the scripted server."""

    def server_env(server: FakeProvider) -> dict[str, str]:
        return {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": SECRET}

    return run_sample(TEMPLATE, work, script, server_env, *args, bindir=bindir)


def _journal(workdir: Path) -> list[dict]:
    return journal_of(workdir)[1]


@pytest.fixture(scope="module")
def claude_bin() -> str:
    return require("claude")


def test_claude_code_fixes_the_invoice_bug_and_the_checks_decide(
    tmp_path: Path, claude_bin: str
) -> None:
    work = sample_copy("invoice", tmp_path)
    test_file = work / "tests" / "test_cancelled_lines.py"
    totals = work / "invoice" / "totals.py"
    script = AgentScript(
        [
            # iteration 1, reproduce: the test that shows the bug
            call("Write", {"file_path": str(test_file), "content": REPRO_TEST}),
            say("I added a failing test."),
            # iteration 2, fix: read, then edit (Claude Code refuses an edit of an unread file)
            call("Read", {"file_path": str(totals)}),
            call("Edit", {"file_path": str(totals), "old_string": OLD, "new_string": NEW}),
            say("Fixed: zero units give an average of 0."),
        ]
    )
    proc, summary = _run(work, script, claude_bin, "--model", "anthropic:claude-sonnet-4-5")
    assert summary["outcome"] == "done", proc.stderr
    assert [t["id"] for t in summary["tasks"]] == ["reproduce", "fix"]
    assert summary["iterations"] == 2
    # the edits are Claude Code's, made with its own tools in the working tree
    assert test_file.read_text() == REPRO_TEST
    assert "if units == 0:" in totals.read_text()
    # Claude Code was run with the model named on the command line, and every main-loop
    # request carried the key; usage reported per call counts against the run
    assert {r.json()["model"] for r in script.main} == {"claude-sonnet-4-5"}
    assert all(r.headers.get("x-api-key") == SECRET for r in script.main)
    assert summary["usage"]["prompt_tokens"] >= 5 * 120
    events = _journal(work)
    turns = [e for e in events if e["event"] == "agent_turn"]
    assert [t["tools"] for t in turns] == [["Write"], ["Read", "Edit"]]
    assert all(t["exit_code"] == 0 and t["error"] == "" for t in turns)
    # the raw output is kept per iteration; the key is in no file of the run
    (run,) = run_dirs(work)
    raw = run / "kept" / str(turns[0]["iteration"]) / turns[0]["artifact"]
    assert '"type":"result"' in raw.read_text()
    for path in run.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path
    assert not (work / ".claude").exists()  # its home and config live under the run


def test_a_denied_command_ends_as_a_retry_never_as_done(tmp_path: Path, claude_bin: str) -> None:
    work = sample_copy("invoice", tmp_path)
    script = AgentScript(
        [
            call("Bash", {"command": WRITES_THE_TEST, "description": "write the test"}),
            say(CLAIM),
        ]
    )
    proc, summary = _run(work, script, claude_bin, "--max-iterations", "1")
    assert_denied_command_retried(work, summary, proc.stderr, "Bash(python3 -c")
    (iteration,) = [e for e in _journal(work) if e["event"] == "iteration"]
    assert "refused" in iteration["decision"]["message"]
