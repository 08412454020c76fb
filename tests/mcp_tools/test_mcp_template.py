"""``act.mcp`` in the language: servers, ``mcp__SERVER__TOOL`` names in ``act.tools`` and
``limits.per_tool``, each mistake located; ``explain`` lists the servers and their tools."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.support.cli import looprun

HEAD = """\
looprun: 1
name: mcp-demo
observe:
  tests: {run: "true", parser: exit_code}
exit: [tests.ok]
refine:
  - else: {retry: "again"}
"""


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "t.yaml"
    path.write_text(HEAD + textwrap.dedent(body))
    return path


def test_a_valid_declaration_validates_and_explains(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """\
        act:
          prompt: "Task: {{ task.goal }}"
          tools: [read_file, "mcp__fs__read_*", mcp__docs__search]
          mcp:
            fs:
              command: [mcp-server-filesystem, "."]
              env: {TOKEN: "${MY_TOKEN}"}
              paths: {read_text_file: [path]}
              write_paths: {write_file: [path]}
              timeout: 20s
            docs: {url: "http://127.0.0.1:9/mcp", headers: {Authorization: "Bearer ${T}"}}
        limits: {per_tool: {mcp__fs__read_text_file: 3}}
        """,
    )
    assert looprun("validate", str(path), cwd=tmp_path).returncode == 0
    out = looprun("explain", str(path), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "mcp server fs: mcp-server-filesystem .; tools: mcp__fs__read_*" in out.stdout
    assert "mcp server docs: http://127.0.0.1:9/mcp; tools: mcp__docs__search" in out.stdout
    assert "write_file: path arguments path" in out.stdout


def test_every_mistake_is_located(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """\
        act:
          prompt: "Task: {{ task.goal }}"
          tools: [read_file, mcp__fz__x, mcp__fs, mcp__fs__read_*]
          mcp:
            fs:
              command: [mcp-server-filesystem, "."]
              env: {"bad name": x}
              cwd: ../elsewhere
            web: {url: "ftp://x"}
            both: {url: "http://x", command: [a]}
            bad__name: {command: [a]}
        limits: {per_tool: {mcp__nope__x: 2, mcp__fs__read_*: 1}}
        """,
    )
    out = looprun("validate", str(path), cwd=tmp_path)
    assert out.returncode == 2
    got = out.stdout + out.stderr
    expected = [
        f"{path}:10:22: act.tools[1]: 'mcp__fz__x' names MCP server 'fz', which act.mcp "
        "does not declare (did you mean 'fs'?)",
        f"{path}:10:34: act.tools[2]: 'mcp__fs': an MCP tool is named mcp__SERVER__TOOL",
        f"{path}:14:13: act.mcp.fs.env.bad name: 'bad name' is not an environment variable",
        f"{path}:15:12: act.mcp.fs.cwd: '../elsewhere' must be a path inside",
        f"{path}:16:5: act.mcp.web: server 'web' is declared, but act.tools allows none",
        f"{path}:16:16: act.mcp.web.url: 'ftp://x' is not an http:// or https:// URL",
        f"{path}:17:11: act.mcp.both: an MCP server needs exactly one of `command`",
        f"{path}:18:5: act.mcp.bad__name: server name 'bad__name'",
        f"{path}:19:21: limits.per_tool.mcp__nope__x: 'mcp__nope__x' names MCP server 'nope'",
        "limits.per_tool.mcp__fs__read_*: 'mcp__fs__read_*': a cap names one tool",
    ]
    for line in expected:
        assert line in got, f"{line}\n---\n{got}"
    assert "Traceback" not in got


def test_servers_without_an_allow_list_are_refused(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """\
        act:
          prompt: "Task: {{ task.goal }}"
          mcp:
            fs: {command: [mcp-server-filesystem, "."]}
        """,
    )
    out = looprun("validate", str(path), cwd=tmp_path)
    assert out.returncode == 2
    assert f"{path}:10:3: act.mcp: MCP servers are declared, but act.tools is not given" in (
        out.stdout + out.stderr
    )


def test_agent_clis_other_than_claude_code_get_no_servers(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """\
        act:
          prompt: "Task: {{ task.goal }}"
          agent: {cli: codex, allow_tools: [mcp__fs__read]}
          mcp:
            fs: {command: [mcp-server-filesystem, "."]}
        """,
    )
    out = looprun("validate", str(path), cwd=tmp_path)
    assert out.returncode == 2
    assert "act.mcp: MCP servers are passed through to claude-code only" in out.stdout + out.stderr
