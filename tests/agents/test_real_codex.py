"""The real Codex binary as the actor, against a loopback server speaking the OpenAI
Responses API (streamed): its own shell tool makes the edits, looprun decides."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from tests.e2e.e2e_helpers import run_dirs, sample_copy, summary_of
from tests.support.agent_clis import require, two_turns_of_one_session
from tests.support.agent_server import AgentScript, call, say
from tests.support.cli import looprun
from tests.support.fake_provider import FakeProvider

# a real agent CLI from npm or PyPI: the e2e tier (`pytest -m e2e`)
pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "samples" / "agents" / "bugfix-codex.yaml"
INTENT = (REPO / "samples" / "invoice" / "intent.txt").read_text().strip()
SECRET = "sk-openai-loopback-secret-51c2"

WRITE_TEST = """cat > tests/test_cancelled_lines.py <<'EOF'
from invoice.totals import Line, summary


def test_summary_of_an_invoice_with_only_cancelled_lines():
    result = summary([Line("cancelled widget", 0, 1250)])
    assert result["total"] == 0
    assert result["average_unit_price"] == 0
EOF"""
FIX = """python3 - <<'EOF'
from pathlib import Path
p = Path("invoice/totals.py")
old = "    units = sum(line.quantity for line in lines)\\n"
p.write_text(p.read_text().replace(old, old + "    if units == 0:\\n        return 0\\n"))
EOF"""


@pytest.fixture(scope="module")
def codex_bin() -> str:
    return require("codex")


def _env(server: FakeProvider, bindir: str) -> dict[str, str]:
    return {
        "PATH": os.pathsep.join((bindir, str(Path(sys.executable).parent), os.environ["PATH"])),
        "LOOPRUN_CODEX_BASE_URL": server.url + "/v1",
        "OPENAI_API_KEY": SECRET,
    }


def test_codex_fixes_the_invoice_bug_and_the_checks_decide(tmp_path: Path, codex_bin: str) -> None:
    work = sample_copy("invoice", tmp_path)
    script = AgentScript(
        [
            call("exec_command", {"cmd": WRITE_TEST}),
            say("I added a failing test."),
            call("exec_command", {"cmd": FIX}),
            say("Fixed."),
        ],
        model="gpt-5-codex",
    )
    with FakeProvider(script) as server:
        proc = looprun(
            str(TEMPLATE), "--intent", INTENT, "--json", "--model", "openai:gpt-5-codex",
            cwd=work, env=_env(server, codex_bin), timeout=300,
        )  # fmt: skip
    summary = summary_of(proc)
    assert summary["outcome"] == "done", proc.stderr
    assert summary["iterations"] == 2
    assert "if units == 0:" in (work / "invoice" / "totals.py").read_text()
    assert {r.json()["model"] for r in script.main} == {"gpt-5-codex"}
    assert all(r.headers.get("authorization") == f"Bearer {SECRET}" for r in script.main)
    (run,) = run_dirs(work)
    events = [json.loads(x) for x in (run / "journal.jsonl").read_text().splitlines()]
    turns = [e for e in events if e["event"] == "agent_turn"]
    assert [t["tools"] for t in turns] == [["command_execution"], ["command_execution"]]
    # each turn is a fresh session: two requests of 120 input tokens each
    assert [t["prompt_tokens"] for t in turns] == [240, 240]
    for path in run.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path


def test_resumed_codex_sessions_are_charged_per_call(tmp_path: Path, codex_bin: str) -> None:
    script = AgentScript([say("one"), say("two")], model="gpt-5-codex")
    with FakeProvider(script) as server:
        env = {**os.environ, **_env(server, codex_bin)}
        first, second = two_turns_of_one_session("codex", "gpt-5-codex", env, tmp_path)
    assert first.error == "" and second.error == "", (first, second)
    assert second.session_id == first.session_id
    # Codex reports 240 after the second turn (its running total); this call used 120
    assert first.prompt_tokens == 120
    assert second.session_usage["prompt_tokens"] == 240
    assert second.prompt_tokens == 120
