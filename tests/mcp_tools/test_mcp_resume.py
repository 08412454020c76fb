"""A run with MCP servers paused for an approval and resumed: the resumed run starts its
servers again, and the model's next call reaches them."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from tests.support.cli import looprun
from tests.support.git_repos import git_repo
from tests.support.mcp_command import server_command


def test_a_resumed_run_starts_its_servers_again(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "README.md").write_text("notes\n")
    git_repo(work)
    template = {
        "looprun": 1,
        "name": "approve-notes",
        "inputs": {"intent": {"type": "string", "required": True}},
        "act": {
            "prompt": "{{ intent }}",
            "tools": ["mcp__t__write_note"],
            "constraints": {"approve": {"paths": ["b.txt"]}},
            "mcp": {
                "t": {
                    "command": server_command(),
                    "write_paths": {"write_note": ["path"]},
                }
            },
        },
        "observe": {"both": {"run": "test -f b.txt && test -f c.txt", "parser": "exit_code"}},
        "exit": ["both.ok"],
        "refine": [{"else": {"retry": "write the other note"}}],
        "limits": {"max_iterations": 3},
    }
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(template, sort_keys=False))

    def write(path: str) -> dict:
        call = {"name": "mcp__t__write_note", "arguments": {"path": path, "text": path}}
        return {"tool_calls": [call]}

    turns = [write("b.txt"), {"text": "wrote b"}, write("c.txt"), {"text": "wrote c"}]
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(turns))
    first = looprun(
        str(tmp_path / "t.yaml"), "--intent", "two notes", "--workdir", str(work),
        "--model", f"script:{tmp_path / 'script.yaml'}", "--json",
        cwd=tmp_path,
    )  # fmt: skip
    paused = json.loads(first.stdout)
    assert paused["outcome"] == "escalated" and paused["code"] == "approval", first.stderr
    resumed = looprun(
        "resume", paused["run_id"], "--workdir", str(work), "--approve", "--json", cwd=tmp_path
    )
    summary = json.loads(resumed.stdout)
    assert summary["outcome"] == "done", resumed.stderr
    assert "mcp: 1 server(s) started" in resumed.stderr
    assert (work / "c.txt").read_text() == "c.txt"
