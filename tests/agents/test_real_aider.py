"""The real Aider as the actor, against a loopback OpenAI chat-completions server.

The server plays scripted model replies in Aider's own edit format (SEARCH/REPLACE
blocks); Aider applies them to the run's tree, and looprun runs the real checks and
decides. Done comes from the tests, never from what Aider says. Aider runs from the
virtualenv of its own that LOOPRUN_AIDER names, with no network but the loopback server.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.e2e_helpers import run_dirs, sample_copy
from tests.support.agent_clis import require
from tests.support.agent_server import AgentScript, say
from tests.support.fake_provider import Canned, FakeProvider, Recorded, openai_error
from tests.support.invoice_bug import NEW, OLD, REPRO_TEST, journal_of, run_sample

# a real agent CLI from npm or PyPI: the e2e tier (`pytest -m e2e`)
pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "samples" / "agents" / "bugfix-aider.yaml"
SECRET = "sk-loopback-aider-secret-5d2e8b"


def block(path: str, search: str, replace: str, text: str = "") -> str:
    """A reply in Aider's diff edit format: one SEARCH/REPLACE block for ``path``."""
    edit = f"<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE"
    return f"{text}\n\n{path}\n```python\n{edit}\n```\n"


def script(*replies: str) -> AgentScript:
    """The replies in order, each as one chat completion of 500 prompt / 60 output tokens."""
    return AgentScript([say(r, input_tokens=500, output_tokens=60) for r in replies])


def _run(work: Path, replies: Any, aider: str, *args: str) -> tuple[Any, dict]:
    def server_env(server: FakeProvider) -> dict[str, str]:
        return {
            "LOOPRUN_AIDER": aider,
            "LOOPRUN_AIDER_BASE_URL": server.openai_url,
            "OPENAI_API_KEY": SECRET,
        }

    model = ("--model", "openai:gpt-4o")
    return run_sample(TEMPLATE, work, replies, server_env, *model, *args, timeout=600)


def _git(work: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=work, capture_output=True, text=True, check=True
    ).stdout.strip()


def _journal(workdir: Path) -> list[dict]:
    return journal_of(workdir)[1]


@pytest.fixture(scope="module")
def aider() -> str:
    return str(Path(require("aider")) / "aider")


def test_aider_fixes_the_invoice_bug_and_the_checks_decide(tmp_path: Path, aider: str) -> None:
    work = sample_copy("invoice", tmp_path)
    test_file = work / "tests" / "test_cancelled_lines.py"
    totals = work / "invoice" / "totals.py"
    replies = script(
        # iteration 1, reproduce: a new file (an empty SEARCH creates it)
        block("tests/test_cancelled_lines.py", "", REPRO_TEST, "I added a failing test."),
        # iteration 2, fix: a file the reply names is added to the chat and the model asked
        # again (aider applies no edit to a file it has not shown the model)
        "The average is computed in invoice/totals.py; I need to see it.",
        block("invoice/totals.py", OLD, NEW, "Fixed: zero units give an average of 0."),
    )
    proc, summary = _run(work, replies, aider)
    assert summary["outcome"] == "done", proc.stderr
    assert [t["id"] for t in summary["tasks"]] == ["reproduce", "fix"]
    assert summary["iterations"] == 2
    # the edits are Aider's, applied from its edit format in the working tree
    assert test_file.read_text() == REPRO_TEST
    assert "if units == 0:" in totals.read_text()
    # Aider called the server with the model named on the command line and the key
    assert {r.json()["model"] for r in replies.main} == {"gpt-4o"}
    assert all(r.headers.get("authorization") == f"Bearer {SECRET}" for r in replies.main)
    events = _journal(work)
    turns = [e for e in events if e["event"] == "agent_turn"]
    assert [t["tools"] for t in turns] == [
        ["edit(tests/test_cancelled_lines.py)"],
        ["edit(invoice/totals.py)"],
    ]
    assert all(t["exit_code"] == 0 and t["error"] == "" for t in turns)
    assert turns[1]["final_message"].startswith("Fixed: zero units")
    # usage from Aider's analytics log, per call, counts against the run
    assert [(t["turns"], t["prompt_tokens"]) for t in turns] == [(1, 500), (2, 1000)]
    assert summary["usage"]["prompt_tokens"] == 1500
    assert summary["usage"]["cost_usd"] > 0  # aider prices gpt-4o from litellm's own table
    # nothing of Aider's own in the tree: no .aider* files, .gitignore untouched, no
    # commit, and the new test file it staged is staged in its own index, not the user's
    assert not list(work.glob(".aider*"))
    assert ".aider" not in (work / ".gitignore").read_text()
    assert _git(work, "rev-list", "--count", "HEAD") == "1"
    assert _git(work, "diff", "--cached", "--name-only") == ""
    # the raw output is kept per iteration; the key is in no file of the run
    (run,) = run_dirs(work)
    raw = (run / "kept" / str(turns[0]["iteration"]) / turns[0]["artifact"]).read_text()
    assert "Applied edit to tests/test_cancelled_lines.py" in raw
    # it started offline: no attempt to download litellm's model table (it prints the
    # failure when it tries), no version check
    assert "model_prices_and_context_window" not in raw and "HTTPSConnectionPool" not in raw
    assert '"event": "message_send"' in raw
    for path in run.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path


def test_an_edit_to_a_denied_path_is_rolled_back_never_done(tmp_path: Path, aider: str) -> None:
    work = sample_copy("invoice", tmp_path)
    workflow = "name: ci\non: push\n"
    replies = script(
        block("tests/test_cancelled_lines.py", "", REPRO_TEST, "I added a failing test.")
        + block(".github/workflows/ci.yml", "", workflow, "And a workflow."),
    )
    proc, summary = _run(work, replies, aider, "--max-iterations", "1")
    assert summary["outcome"] == "exhausted", proc.stderr
    events = _journal(work)
    (turn,) = [e for e in events if e["event"] == "agent_turn"]
    assert "edit(.github/workflows/ci.yml)" in turn["tools"]  # Aider did write it ...
    (iteration,) = [e for e in events if e["event"] == "iteration"]
    assert iteration["decision"]["action"] == "rollback"  # ... and looprun undid the turn
    assert ".github/workflows/ci.yml" in iteration["decision"]["message"]
    assert not (work / ".github").exists()
    assert not (work / "tests" / "test_cancelled_lines.py").exists()


def test_a_rejected_key_is_an_auth_error_though_aider_exits_0(tmp_path: Path, aider: str) -> None:
    work = sample_copy("invoice", tmp_path)

    def unauthorised(request: Recorded) -> Canned:
        return openai_error(401, f"Incorrect API key provided: {SECRET}", code="invalid_api_key")

    proc, summary = _run(work, unauthorised, aider, "--max-iterations", "1")
    assert summary["outcome"] == "exhausted", proc.stderr
    (turn,) = [e for e in _journal(work) if e["event"] == "agent_turn"]
    assert turn["exit_code"] == 0 and turn["error"] == "auth"
    assert "AuthenticationError" in turn["error_detail"]
    (run,) = run_dirs(work)
    for path in run.rglob("*"):  # the server quoted the key back: redacted everywhere
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path
