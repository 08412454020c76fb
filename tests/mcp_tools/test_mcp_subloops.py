"""Sub-loops with MCP servers: each sub-loop starts its own servers in its own worktree
(and stops them when it ends), so two running at once never share one."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import yaml
from tests.support.cli import looprun
from tests.support.git_repos import git_repo
from tests.support.mcp_command import server_command

MARKER = f"--marker={uuid.uuid4().hex}"  # this test's servers, among any others running

INNER = {
    "looprun": 1,
    "name": "note",
    "inputs": {"intent": {"type": "string", "required": True}},
    "act": {
        "prompt": "{{ intent }}",
        "tools": ["mcp__t__write_note"],
        "max_steps": 4,
        "mcp": {
            "t": {
                "command": server_command(MARKER),
                "write_paths": {"write_note": ["path"]},
            }
        },
    },
    "observe": {"diff": {"parser": "git_diff"}},
    "exit": ["diff.lines > 0"],
    "refine": [{"else": {"escalate": "no change"}}],
    "limits": {"max_iterations": 2},
}

OUTER = {
    "looprun": 1,
    "name": "pair",
    "inputs": {"intent": {"type": "string", "required": True}},
    "plan": {
        "mode": "static",
        "tasks": [{"id": "left", "goal": "left note"}, {"id": "right", "goal": "right note"}],
    },
    "each_task": {
        "uses": "./note.yaml",
        "with": {"intent": "{{ task.goal }}"},
        "isolation": "worktree",
        "parallel": 2,
    },
    "exit": ["subloops.all_done"],
    "refine": [{"else": {"escalate": "a sub-loop did not finish"}}],
    "limits": {"max_iterations": 1},
}


def _turns(path: str, text: str) -> list[dict]:
    call = {"name": "mcp__t__write_note", "arguments": {"path": path, "text": text}}
    return [{"tool_calls": [call]}, {"text": "done"}]


def test_each_sub_loop_gets_its_own_servers(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "README.md").write_text("notes\n")
    git_repo(work)
    (tmp_path / "note.yaml").write_text(yaml.safe_dump(INNER, sort_keys=False))
    (tmp_path / "pair.yaml").write_text(yaml.safe_dump(OUTER, sort_keys=False))
    script = {"tasks": {"left": _turns("left.txt", "L\n"), "right": _turns("right.txt", "R\n")}}
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script))
    proc = looprun(
        str(tmp_path / "pair.yaml"), "--intent", "two notes", "--workdir", str(work),
        "--model", f"script:{tmp_path / 'script.yaml'}", "--json",
        cwd=tmp_path, timeout=240,
    )  # fmt: skip
    assert proc.stdout.strip(), proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["outcome"] == "done", proc.stderr
    assert (work / "left.txt").read_text() == "L\n"
    assert (work / "right.txt").read_text() == "R\n"
    assert proc.stderr.count("mcp: 1 server(s) started") == 2
    left = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert MARKER not in left
