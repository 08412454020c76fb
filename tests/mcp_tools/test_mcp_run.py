"""MCP servers as act tools, through the real CLI with a scripted model: a server built
with the Python SDK (tests/support/mcp_server.py) and the npm filesystem server. Every
call goes through the policy; a server that misbehaves is an error, never a hang."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.support.cli import looprun
from tests.support.fake_provider import FakeProvider, openai_reply
from tests.support.git_repos import git_repo
from tests.support.mcp_command import server_command


def _template(tools: list[str], server: dict[str, Any], *, sandbox: str = "auto") -> str:
    doc = {
        "looprun": 1,
        "name": "mcp-run",
        "sandbox": sandbox,
        "inputs": {"intent": {"type": "string", "required": True}},
        "act": {
            "prompt": "{{ task.goal }}",
            "tools": tools,
            "constraints": {
                "paths": {"allow": ["notes/**"], "deny": ["secret.txt"]},
                "max_output_bytes": 4000,
            },
            "mcp": {"t": server},
        },
        "observe": {"done": {"run": "test -f notes/never.txt", "parser": "exit_code"}},
        "exit": ["done.ok"],
        "refine": [{"else": {"retry": "again"}}],
        "limits": {"max_iterations": 1},
    }
    return yaml.safe_dump(doc, sort_keys=False)


def _server(*extra: str, **fields: Any) -> dict[str, Any]:
    return {"command": server_command(*extra), **fields}


def _run(
    tmp_path: Path,
    template: str,
    calls: list[dict[str, Any]],
    env: dict[str, str] | None = None,
    timeout: float = 120,
) -> tuple[Any, dict[str, Any] | None, list[dict[str, Any]]]:
    work = tmp_path / "work"
    (work / "notes").mkdir(parents=True)
    (work / "notes" / "a.txt").write_text("note a\n")
    (work / "secret.txt").write_text("do not read\n")
    git_repo(work)
    (tmp_path / "outside.txt").write_text("outside\n")
    (tmp_path / "t.yaml").write_text(template)
    (tmp_path / "script.yaml").write_text(yaml.safe_dump([{"tool_calls": calls}, {"text": "ok"}]))
    proc = looprun(
        str(tmp_path / "t.yaml"),
        "--intent",
        "use the tools",
        "--workdir",
        str(work),
        "--model",
        f"script:{tmp_path / 'script.yaml'}",
        "--json",
        cwd=tmp_path,
        env=env,
        timeout=timeout,
    )
    summary = json.loads(proc.stdout) if proc.stdout.strip() else None
    events: list[dict[str, Any]] = []
    if summary is not None:
        lines = (Path(summary["run_dir"]) / "journal.jsonl").read_text().splitlines()
        events = [json.loads(line) for line in lines]
    return proc, summary, events


def _calls(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["event"] == "tool_call"]


def _call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"name": tool, "arguments": arguments}


def test_allowed_and_refused_calls_paths_bounds_and_secrets(tmp_path: Path) -> None:
    canary = f"canary-{uuid.uuid4().hex}"
    tools = [
        "read_file",
        "mcp__t__echo",
        "mcp__t__read_note",
        "mcp__t__write_note",
        "mcp__t__big",
        "mcp__t__environment",
        "mcp__t__leak",
    ]
    server = _server(
        env={"PASSED_TOKEN": "${MCP_PROBE_TOKEN}"},
        paths={"read_note": ["path"]},
        write_paths={"write_note": ["path"]},
    )
    calls = [
        _call("mcp__t__echo", text="hello"),
        _call("mcp__t__read_note", path="notes/a.txt"),
        _call("mcp__t__read_note", path=str(tmp_path / "outside.txt")),
        _call("mcp__t__read_note", path="../outside.txt"),
        _call("mcp__t__read_note", path="secret.txt"),
        _call("mcp__t__write_note", path="elsewhere.txt", text="x"),
        _call("mcp__t__write_note", path="notes/b.txt", text="written by the server"),
        _call("mcp__t__big", kilobytes=300),
        _call("mcp__t__environment", name="MCP_PROBE_TOKEN"),
        _call("mcp__t__environment", name="PASSED_TOKEN"),
        _call("mcp__t__leak", text=canary),
        _call("mcp__t__crash"),  # listed by the server, not allowed by act.tools
    ]
    proc, summary, events = _run(
        tmp_path, _template(tools, server), calls, env={"MCP_PROBE_TOKEN": canary}
    )
    assert summary is not None, proc.stderr
    assert summary["outcome"] == "exhausted", proc.stderr
    assert "mcp: 1 server(s) started; tools offered: mcp__t__echo" in proc.stderr
    got = _calls(events)
    assert [c["tool"] for c in got] == [c["name"] for c in calls]
    results = [c["result"] for c in got]
    assert results[0] == "echo: hello" and not got[0]["is_error"]
    assert results[1] == "note a\n"
    assert "refused by policy (path.outside)" in results[2]
    assert "refused by policy (path.outside)" in results[3]
    assert "refused by policy (path.deny)" in results[4]
    assert "refused by policy (path.not_allowed)" in results[5]
    assert results[6] == "wrote notes/b.txt"
    assert (tmp_path / "work" / "notes" / "b.txt").read_text() == "written by the server"
    # 300 kB bounded like a command's output (max_output_bytes: 4000); the journal keeps
    # its head and the length the model saw
    seen = re.search(r"\[(\d+) chars\]$", results[7])
    assert seen is not None and 4000 <= int(seen.group(1)) <= 4100, results[7][-50:]
    assert results[8] == "(unset)"  # looprun's secrets are not inherited
    assert results[9] == "[redacted]"  # passed on purpose, and still never shown
    assert results[10] == "the secret is [redacted]"
    assert "refused by policy (tool.not_enabled)" in results[11]
    refusals = [e["rule"] for e in events if e["event"] == "policy_violation"]
    assert refusals == [
        "path.outside",
        "path.outside",
        "path.deny",
        "path.not_allowed",
        "tool.not_enabled",
    ]
    record = (Path(summary["run_dir"])).rglob("*")
    for path in record:
        if path.is_file():
            assert canary not in path.read_text(errors="replace"), path
    assert canary not in proc.stderr + proc.stdout


def test_a_server_that_hangs_or_crashes_mid_run_is_a_tool_error(tmp_path: Path) -> None:
    calls = [
        _call("mcp__t__hang"),
        _call("mcp__t__crash"),
        _call("mcp__t__echo", text="after the crash"),
    ]
    started = time.monotonic()
    proc, summary, events = _run(tmp_path, _template(["mcp__t__*"], _server(timeout="2s")), calls)
    assert summary is not None, proc.stderr
    assert time.monotonic() - started < 60
    got = _calls(events)
    assert [c["is_error"] for c in got] == [True, True, True]
    assert "hang gave no answer within 2s" in got[0]["result"]
    assert "MCP server t" in got[1]["result"]
    assert "MCP server t" in got[2]["result"]
    assert summary["outcome"] == "exhausted"


@pytest.mark.parametrize(
    ("server", "expected"),
    [
        ({"command": ["no-such-mcp-server-xyz"]}, "program not found: no-such-mcp-server-xyz"),
        (_server("--hang-at-start", start_timeout="2s"), "no answer within 2s of starting"),
        (_server("--exit-at-start"), "cannot start: no configuration"),
    ],
    ids=["missing", "hangs", "exits"],
)
def test_a_server_that_cannot_start_stops_the_run_before_any_model_call(
    tmp_path: Path, server: dict[str, Any], expected: str
) -> None:
    proc, _summary, events = _run(tmp_path, _template(["mcp__t__*"], server), [], timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert expected in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not [e for e in events if e.get("event") in ("model_call", "tool_call")]


def test_a_tool_act_tools_names_that_the_server_lacks_stops_the_run(tmp_path: Path) -> None:
    proc, _summary, _events = _run(tmp_path, _template(["mcp__t__nope"], _server()), [])
    assert proc.returncode == 2
    assert "MCP server t has no tool 'nope', which act.tools allows" in proc.stderr


def test_a_stdio_server_runs_inside_the_sandbox(tmp_path: Path) -> None:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    target = tmp_path / "escaped.txt"
    calls = [_call("mcp__t__write_outside", path=str(target))]
    proc, summary, events = _run(
        tmp_path, _template(["mcp__t__*"], _server(), sandbox="required"), calls
    )
    assert summary is not None, proc.stderr
    assert "refused: [Errno 30] Read-only file system" in _calls(events)[0]["result"]
    assert not target.exists()


@pytest.mark.e2e  # a real MCP server from npm
def test_the_npm_filesystem_server(tmp_path: Path) -> None:
    program = shutil.which("mcp-server-filesystem")
    if program is None:
        why = "@modelcontextprotocol/server-filesystem is not installed"
        if os.environ.get("CI"):
            pytest.fail(why + ": .ci/run installs it; CI must run this test")
        pytest.skip(why)
    server = {
        "command": [program, "."],
        "paths": {"read_text_file": ["path"], "list_directory": ["path"]},
        "write_paths": {"write_file": ["path"]},
    }
    tools = ["mcp__t__read_text_file", "mcp__t__list_directory", "mcp__t__write_file"]
    calls = [
        _call("mcp__t__read_text_file", path="notes/a.txt"),
        _call("mcp__t__read_text_file", path="/etc/hostname"),
        _call("mcp__t__write_file", path="notes/c.txt", content="from npm"),
        _call("mcp__t__write_file", path="README.md", content="no"),
        _call("mcp__t__list_directory", path="notes"),
        _call("mcp__t__read_multiple_files", paths=["notes/a.txt"]),
    ]
    proc, summary, events = _run(tmp_path, _template(tools, server), calls)
    assert summary is not None, proc.stderr
    results = [c["result"] for c in _calls(events)]
    assert results[0] == "note a\n"
    assert "refused by policy (path.outside)" in results[1]
    assert (tmp_path / "work" / "notes" / "c.txt").read_text() == "from npm"
    assert "refused by policy (path.not_allowed)" in results[3]
    assert not (tmp_path / "work" / "README.md").exists()
    assert "a.txt" in results[4] and "c.txt" in results[4]
    assert "refused by policy (tool.not_enabled)" in results[5]


def test_per_tool_caps_count_mcp_calls(tmp_path: Path) -> None:
    template = yaml.safe_load(_template(["mcp__t__echo"], _server()))
    template["limits"]["per_tool"] = {"mcp__t__echo": 1}
    calls = [_call("mcp__t__echo", text="one"), _call("mcp__t__echo", text="two")]
    proc, summary, events = _run(tmp_path, yaml.safe_dump(template), calls)
    assert summary is not None, proc.stderr
    assert summary["outcome"] == "exhausted"
    assert "per_tool limit for mcp__t__echo reached (1 calls)" in summary["reason"]
    assert [c["result"] for c in _calls(events)] == ["echo: one"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_streamable_http_server(tmp_path: Path) -> None:
    port = _free_port()
    proc = subprocess.Popen(
        server_command("--http", str(port)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        server = {"url": f"http://127.0.0.1:{port}/mcp", "headers": {"X-Probe": "${PROBE}"}}
        run, summary, events = _run(
            tmp_path,
            _template(["mcp__t__echo"], server),
            [_call("mcp__t__echo", text="over http")],
            env={"PROBE": "1"},
        )
        assert summary is not None, run.stderr
        assert [c["result"] for c in _calls(events)] == ["echo: over http"]
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_the_model_is_offered_the_allowed_tools_with_their_own_schemas(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("a\n")
    git_repo(work)
    tools = ["read_file", "mcp__t__echo", "mcp__t__big"]
    (tmp_path / "t.yaml").write_text(_template(tools, _server()))
    with FakeProvider() as server:
        server.push(
            openai_reply(tool_calls=[("mcp__t__echo", {"text": "over the wire"})]),
            openai_reply("done"),
        )
        proc = looprun(
            str(tmp_path / "t.yaml"), "--intent", "x", "--workdir", str(work),
            "--model", "openai:gpt-4o-mini", "--base-url", server.openai_url, "--json",
            cwd=tmp_path, env={"OPENAI_API_KEY": "sk-test-0000"},
        )  # fmt: skip
        first, second = server.requests[0].json(), server.requests[1].json()
    assert proc.stdout.strip(), proc.stderr
    offered = {t["function"]["name"]: t["function"] for t in first["tools"]}
    assert set(offered) == set(tools)
    assert offered["mcp__t__echo"]["description"] == "Answer with the text given."
    schema = offered["mcp__t__big"]["parameters"]
    assert schema["properties"]["kilobytes"]["type"] == "integer"
    assert schema["required"] == ["kilobytes"]
    answered = [m for m in second["messages"] if m["role"] == "tool"]
    assert answered[0]["content"] == "echo: over the wire"


def test_a_server_that_hangs_at_start_does_not_outlive_the_run(tmp_path: Path) -> None:
    marker = f"--marker={uuid.uuid4().hex}"
    server = _server("--hang-at-start", marker, start_timeout="1s")
    proc, _summary, _events = _run(
        tmp_path, _template(["mcp__t__*"], server, sandbox="off"), [], timeout=60
    )
    assert proc.returncode == 2, proc.stderr
    left = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert marker not in left
