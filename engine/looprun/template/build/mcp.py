"""``act.mcp``: the MCP servers an act turn may call, and the ``mcp__SERVER__TOOL`` names
that allow their tools (in ``act.tools``) and cap them (in ``limits.per_tool``).

What a server offers is known only once it runs, so a tool name is checked against the
server's list at start; here each name must at least name a declared server.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from typing import Any

from looprun.data.freeze import freeze
from looprun.template.build.reader import Reader
from looprun.template.model import (
    BUILTIN_TOOLS,
    MCP_PREFIX,
    MCP_SERVER_NAME,
    McpServerSpec,
    mcp_name,
)
from looprun.template.suggest import did_you_mean
from looprun.template.yamlpos import JsonPath

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TOOL_GLOB = re.compile(r"^[A-Za-z0-9_.*?\[\]!/-]+$")


def declared_servers(r: Reader) -> Mapping[str, Any]:
    """The raw ``act.mcp`` mapping, for the sections that check names against it."""
    raw = r.get(("act", "mcp"), dict)
    return raw if isinstance(raw, dict) else {}


def build_mcp(r: Reader) -> Mapping[str, McpServerSpec]:
    servers = {}
    for name, raw in declared_servers(r).items():
        path: JsonPath = ("act", "mcp", name)
        if not isinstance(name, str) or not MCP_SERVER_NAME.match(name):
            r.problem(
                path,
                f"server name {name!r}: letters, digits, '-' and single '_' only, starting "
                "with a letter (its tools are named mcp__NAME__TOOL)",
                key=True,
            )
            continue
        if not isinstance(raw, dict):
            continue  # the schema says what it must be
        spec = _server(r, name, raw, path)
        if spec is not None:
            servers[name] = spec
    return freeze(servers)


def _server(r: Reader, name: str, raw: dict[str, Any], path: JsonPath) -> McpServerSpec | None:
    command, url = raw.get("command"), raw.get("url")
    if (command is None) == (url is None):
        r.problem(path, "an MCP server needs exactly one of `command` (stdio) or `url` (HTTP)")
        return None
    argv: tuple[str, ...] = ()
    if command is not None:
        if not isinstance(command, list) or not command:
            return None  # the schema reports it
        argv = tuple(str(a) for a in command)
        if not argv[0].strip():
            r.problem((*path, "command", 0), "the program is empty")
            return None
        if "url" in raw or "headers" in raw:
            r.problem((*path, "headers"), "`headers` belong to an HTTP server (`url`)", key=True)
    elif isinstance(url, str) and not re.match(r"^https?://[^/\s]+", url):
        r.problem((*path, "url"), f"{url!r} is not an http:// or https:// URL")
        return None
    cwd = raw.get("cwd")
    if isinstance(cwd, str):
        if url is not None:
            r.problem((*path, "cwd"), "`cwd` belongs to a stdio server (`command`)", key=True)
        norm = posixpath.normpath(cwd)
        if cwd.startswith("/") or norm == ".." or norm.startswith("../"):
            r.problem((*path, "cwd"), f"{cwd!r} must be a path inside the working directory")
    env = _strings(r, (*path, "env"), raw.get("env"), check_names=True)
    headers = _strings(r, (*path, "headers"), raw.get("headers"), check_names=False)
    start = r.duration((*path, "start_timeout"))
    call = r.duration((*path, "timeout"))
    return McpServerSpec(
        name=name,
        command=argv,
        url=url if isinstance(url, str) else None,
        env=freeze(env),
        headers=freeze(headers),
        cwd=cwd if isinstance(cwd, str) else None,
        start_timeout_s=start if start is not None else McpServerSpec.start_timeout_s,
        call_timeout_s=call if call is not None else McpServerSpec.call_timeout_s,
        paths=freeze(_arg_lists(r, (*path, "paths"), raw.get("paths"))),
        write_paths=freeze(_arg_lists(r, (*path, "write_paths"), raw.get("write_paths"))),
        location=r.doc.key_at(path),
    )


def _strings(r: Reader, path: JsonPath, raw: Any, *, check_names: bool) -> dict[str, str]:
    if not isinstance(raw, dict):
        return {}
    found = {}
    for key, value in raw.items():
        if check_names and not _ENV_NAME.match(str(key)):
            r.problem((*path, key), f"{key!r} is not an environment variable name", key=True)
        elif isinstance(value, str):
            found[str(key)] = value
    return found


def _arg_lists(r: Reader, path: JsonPath, raw: Any) -> dict[str, tuple[str, ...]]:
    if not isinstance(raw, dict):
        return {}
    return {
        str(tool): tuple(a for a in args if isinstance(a, str))
        for tool, args in raw.items()
        if isinstance(args, list)
    }


def check_tool_name(r: Reader, path: JsonPath, name: str, *, glob: bool) -> bool:
    """Whether ``name`` is an ``mcp__SERVER__TOOL`` name of a declared server; a problem
    at ``path`` when it starts like one but is not."""
    if not name.startswith(MCP_PREFIX):
        return False
    servers = declared_servers(r)
    parts = mcp_name(name)
    if parts is None:
        r.problem(path, f"{name!r}: an MCP tool is named mcp__SERVER__TOOL", key=not glob)
        return True
    server, tool = parts
    if server not in servers:
        known = [str(s) for s in servers]
        hint = did_you_mean(server, known) or (
            f" (declared: {', '.join(known)})" if known else " (act.mcp declares none)"
        )
        r.problem(
            path,
            f"{name!r} names MCP server '{server}', which act.mcp does not declare{hint}",
            key=not glob,
        )
        return True
    if glob and not _TOOL_GLOB.match(tool):
        r.problem(path, f"{name!r}: the tool part may hold name characters and * ? [ ] only")
    elif not glob and any(c in tool for c in "*?["):
        r.problem(path, f"{name!r}: a cap names one tool; no glob here", key=True)
    return True


def check_tools(r: Reader, tools_raw: list[Any]) -> None:
    """``act.tools``: the built-in names and ``mcp__SERVER__TOOL`` globs."""
    for i, tool in enumerate(tools_raw):
        if not isinstance(tool, str) or tool in BUILTIN_TOOLS:
            continue
        if not check_tool_name(r, ("act", "tools", i), tool, glob=True):
            hint = did_you_mean(tool, BUILTIN_TOOLS) or f" (tools: {', '.join(BUILTIN_TOOLS)})"
            r.problem(("act", "tools", i), f"unknown tool '{tool}'{hint}")
    servers = declared_servers(r)
    named = (mcp_name(t) for t in tools_raw if isinstance(t, str))
    allowed = {parts[0] for parts in named if parts is not None}
    for name in servers:
        if isinstance(name, str) and MCP_SERVER_NAME.match(name) and name not in allowed:
            r.problem(
                ("act", "mcp", name),
                f"server '{name}' is declared, but act.tools allows none of its tools "
                f"(add mcp__{name}__* or the names of the ones the model may call)",
                key=True,
            )
