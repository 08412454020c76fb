"""Claude Code (npm ``@anthropic-ai/claude-code``) headless: ``claude -p`` with stream-json.

The command line carries the template's rules in Claude Code's own terms: the tools it may
use (``--tools``), the ones it may use without asking (``--allowedTools``, commands as
``Bash(prefix:*)`` rules), edits accepted (``--permission-mode acceptEdits``); in print
mode anything else is denied and listed in ``permission_denials``. User and project
settings and MCP configs are not read, so a settings file in the repository cannot grant
more. Failures are classified from the final ``result`` event: a rejected key comes back
as ``subtype: success`` with ``is_error: true`` and ``api_error_status: 401``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from looprun.act.agents.base import Parsed, Turn, as_int, http_error, json_lines
from looprun.template.agents import claude_bash_rule
from looprun.template.model import McpServerSpec

# Claude Code's file tools; with no allow_tools these are what it gets (no Bash unless the
# template declares command patterns).
DEFAULT_TOOLS = ("Read", "Edit", "Write", "Glob", "Grep")


class ClaudeCode:
    cli = "claude-code"
    program = "claude"
    package = "@anthropic-ai/claude-code"
    key_env = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
    base_url_env = ("ANTHROPIC_BASE_URL",)
    servers = ("https://api.anthropic.com",)

    def command(self, program: str, turn: Turn) -> list[str]:
        mcp_allowed = [t for t in turn.spec.allow_tools if t.startswith("mcp__")]
        tools = [t for t in turn.spec.allow_tools if t not in mcp_allowed] or list(DEFAULT_TOOLS)
        rules = [r for p in turn.constraints.commands if (r := claude_bash_rule(p))]
        if rules and "Bash" not in tools:
            tools.append("Bash")
        cmd = [
            program,
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--permission-mode",
            "acceptEdits",
            "--tools",
            ",".join(tools),
            "--allowedTools",
            ",".join([t for t in tools if t != "Bash"] + rules + mcp_allowed),
            "--setting-sources",
            "",
            "--strict-mcp-config",
        ]
        if turn.spec.mcp:
            # the template's servers, and nothing the repository or the user configured;
            # their tools may be used only as allow_tools names them (print mode denies
            # the rest). ${VAR} stays as written: Claude Code expands it from the
            # environment (see ``environment``), so no secret is written to the run record.
            config = turn.home / "looprun-mcp.json"
            config.parent.mkdir(parents=True, exist_ok=True)
            config.write_text(json.dumps(mcp_config(turn.spec.mcp), indent=2))
            cmd += ["--mcp-config", str(config)]
        if turn.spec.max_turns is not None:
            cmd += ["--max-turns", str(turn.spec.max_turns)]
        if turn.model:
            cmd += ["--model", turn.model]
        if turn.session_id:
            cmd += ["--resume", turn.session_id]
        else:
            cmd += ["--session-id", turn.new_session_id]
        if turn.system:
            cmd += ["--append-system-prompt", turn.system]
        return [*cmd, "--", turn.prompt]

    def environment(self, turn: Turn, env: Mapping[str, str]) -> dict[str, str]:
        wanted = {v for server in turn.spec.mcp.values() for v in mcp_variables(server)}
        return {
            **{k: env[k] for k in sorted(wanted) if k in env},
            "HOME": str(turn.home),
            "CLAUDE_CONFIG_DIR": str(turn.home / ".claude"),
            "CLAUDE_CODE_MAX_RETRIES": "2",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            **{k: env[k] for k in ("ANTHROPIC_BASE_URL",) if env.get(k)},
        }

    def parse(self, output: str) -> Parsed:
        out = Parsed()
        result: dict[str, Any] | None = None
        texts: list[str] = []
        for event in json_lines(output):
            kind = event.get("type")
            if isinstance(event.get("session_id"), str):
                out.session_id = event["session_id"]
            if kind == "system" and event.get("subtype") == "init":
                out.model = str(event.get("model") or "")
            elif kind == "assistant":
                message = event.get("message") or {}
                for block in message.get("content") or []:
                    if block.get("type") == "tool_use":
                        out.tool_calls.append(str(block.get("name") or "?"))
                    elif block.get("type") == "text" and block.get("text"):
                        texts.append(str(block["text"]))
            elif kind == "result":
                result = event
        if texts:
            out.final_message = texts[-1]
        if result is None:
            out.error = "crashed"
            out.error_detail = "no result event in the output"
            return out
        out.turns = as_int(result.get("num_turns"))
        out.final_message = str(result.get("result") or out.final_message)
        for denial in result.get("permission_denials") or []:
            if isinstance(denial, dict):
                out.denials.append(_denial(denial))
        usage = result.get("usage") or {}
        out.cached_tokens = as_int(usage.get("cache_read_input_tokens"))
        out.cache_write_tokens = as_int(usage.get("cache_creation_input_tokens"))
        out.prompt_tokens = (
            as_int(usage.get("input_tokens")) + out.cached_tokens + out.cache_write_tokens
        )
        out.completion_tokens = as_int(usage.get("output_tokens"))
        cost = result.get("total_cost_usd")
        out.cost_usd = float(cost) if isinstance(cost, (int, float)) else None
        reason = str(result.get("terminal_reason") or "")
        subtype = str(result.get("subtype") or "")
        if not result.get("is_error") and subtype == "success":
            out.ok = True
            return out
        status = result.get("api_error_status")
        if subtype == "error_max_turns" or reason == "max_turns":
            out.error = "max_turns"
        elif isinstance(status, int):
            out.error = http_error(status)
        else:
            out.error = "failed"
        out.error_detail = " ".join(
            str(x)
            for x in (subtype, reason, status, result.get("api_error_type"), out.final_message)
            if x
        )[:500]
        return out


def mcp_config(servers: Mapping[str, McpServerSpec]) -> dict[str, Any]:
    """``act.mcp`` in Claude Code's ``--mcp-config`` format (``mcpServers``)."""
    out: dict[str, Any] = {}
    for name, s in servers.items():
        if s.url is not None:
            out[name] = {"type": "http", "url": s.url, "headers": dict(s.headers)}
        else:
            out[name] = {
                "type": "stdio",
                "command": s.command[0],
                "args": list(s.command[1:]),
                "env": dict(s.env),
            }
    return {"mcpServers": out}


def mcp_variables(server: McpServerSpec) -> set[str]:
    """The ``${VAR}`` names a server's env and headers read from the environment."""
    values = [*server.env.values(), *server.headers.values()]
    return {m.group(1) for v in values for m in re.finditer(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", v)}


def _denial(denial: Mapping[str, Any]) -> str:
    """``Bash(rm -rf x)`` / ``Write(path)``: the tool and what it was asked to touch."""
    name = str(denial.get("tool_name") or "?")
    args = denial.get("tool_input") or {}
    target = args.get("command") or args.get("file_path") or args.get("path") or ""
    return f"{name}({str(target)[:200]})" if target else name
