"""Claude Code given the template's MCP servers in its own format (--mcp-config), limited
to the tools allow_tools names: the real binary against a loopback Messages server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from tests.support.agent_clis import require
from tests.support.agent_server import AgentScript, call, say
from tests.support.fake_provider import FakeProvider
from tests.support.git_repos import git_repo
from tests.support.invoice_bug import journal_of, run_sample
from tests.support.mcp_command import server_command

# a real agent CLI from npm or PyPI: the e2e tier (`pytest -m e2e`)
pytestmark = pytest.mark.e2e

SECRET = "sk-ant-loopback-secret-mcp-51c2"


def test_claude_code_calls_an_allowed_mcp_tool_and_is_denied_the_others(
    tmp_path: Path,
) -> None:
    bindir = require("claude")
    work = tmp_path / "work"
    (work / "notes").mkdir(parents=True)
    (work / "notes" / "a.txt").write_text("a\n")
    git_repo(work)
    template = {
        "looprun": 1,
        "name": "claude-mcp",
        "inputs": {"intent": {"type": "string", "required": True}},
        "act": {
            "prompt": "{{ task.goal }}",
            "agent": {
                "cli": "claude-code",
                "max_turns": 5,
                "allow_tools": ["Read", "mcp__t__write_note", "mcp__t__echo"],
            },
            "mcp": {"t": {"command": server_command()}},
        },
        "observe": {"note": {"run": "test -f notes/b.txt", "parser": "exit_code"}},
        "exit": ["note.ok"],
        "refine": [{"else": {"retry": "again"}}],
        "limits": {"max_iterations": 1},
    }
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(template, sort_keys=False))
    script = AgentScript(
        [
            call("mcp__t__crash", {}),  # listed by the server, not allowed: denied
            call("mcp__t__write_note", {"path": "notes/b.txt", "text": "via claude"}),
            say("Wrote the note."),
        ]
    )

    def server_env(server: FakeProvider) -> dict[str, str]:
        return {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": SECRET}

    proc, summary = run_sample(path, work, script, server_env, "--sandbox", "off", bindir=bindir)
    assert summary["outcome"] == "done", proc.stderr
    assert (work / "notes" / "b.txt").read_text() == "via claude"
    run, events = journal_of(work)
    config = json.loads((next(run.rglob("looprun-mcp.json"))).read_text())
    assert config["mcpServers"]["t"]["command"] == sys.executable
    turns = [e for e in events if e["event"] == "agent_turn"]
    assert turns, [e["event"] for e in events]
    assert turns[0]["tools"] == ["mcp__t__crash", "mcp__t__write_note"]
    assert turns[0]["denied"] == ["mcp__t__crash"]
