"""Gemini CLI (npm ``@google/gemini-cli``) headless: ``gemini -p --output-format stream-json``.

Its home (GEMINI_CLI_HOME) is under the run: the settings there select the API-key login
(GEMINI_API_KEY, GOOGLE_GEMINI_BASE_URL for a server of its own), turn off updates and
usage statistics and carry the turn cap (``model.maxSessionTurns``). What it may do is an
admin-tier policy file looprun writes (``--admin-policy``), which outranks user, workspace
and built-in rules: the template's tools allowed, its commands as ``run_shell_command``
rules, and everything else ``ask_user``, which headless means refused. MCP servers and
extensions a repository declares are not started. It runs in the default approval mode
(nothing is approved by the mode itself) with the workspace trusted for the session (it
refuses to run headless otherwise).

A trusted workspace's own settings outrank the user's, and its ``.gemini/.env`` is loaded
into the CLI's environment, so either could send the key to a server the repository
chose or run commands of its own (hooks): looprun does not run Gemini CLI on a tree that
has them. Other ``.env`` files are not read (``advanced.ignoreLocalEnv``), and the server
is always named (the Gemini API's own when none is given), which no ``.env`` overrides.

The final ``result`` event reports success or the error and the usage of every model
call of this run (per call, not the session's total).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from looprun.act.agents.base import Parsed, Turn, as_int, json_lines
from looprun.template.agents import GEMINI_DEFAULT_TOOLS, gemini_shell_rules

# A refused call's result says so; the policy engine's refusal, or a call that would have
# asked the user (headless: refused).
_REFUSED = ("requires user confirmation", "denied by policy", "policy")
SERVER = "https://generativelanguage.googleapis.com"  # the Gemini API's own
# what a trusted workspace configures Gemini CLI with, relative to the tree
WORKSPACE_SETTINGS = (".gemini/settings.json", ".gemini/.env")
MAX_TURNS_EXIT = 53  # Gemini CLI's exit status when the turn cap is reached


class Gemini:
    cli = "gemini"
    program = "gemini"
    package = "@google/gemini-cli"
    key_env = ("GEMINI_API_KEY",)
    base_url_env = ("GOOGLE_GEMINI_BASE_URL",)
    servers = (SERVER,)

    def command(self, program: str, turn: Turn) -> list[str]:
        cmd = [
            program,
            "--output-format",
            "stream-json",
            "--approval-mode",
            "default",
            "--skip-trust",
            "--admin-policy",
            str(turn.home / "looprun-policy.toml"),
            "--allowed-mcp-server-names",
            "none",
            "--extensions",
            "none",
        ]
        if turn.model:
            cmd += ["--model", turn.model]
        if turn.session_id:
            cmd += ["--resume", turn.session_id]
        else:
            cmd += ["--session-id", turn.new_session_id]
        return [*cmd, "--prompt", turn.prompt]

    def environment(self, turn: Turn, env: Mapping[str, str]) -> dict[str, str]:
        home = turn.home
        gemini_dir = home / ".gemini"
        gemini_dir.mkdir(parents=True, exist_ok=True)
        settings: dict[str, Any] = {
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "advanced": {"ignoreLocalEnv": True},  # a repository's .env is not read
        }
        if turn.spec.max_turns is not None:
            settings["model"] = {"maxSessionTurns": turn.spec.max_turns}
        (gemini_dir / "settings.json").write_text(json.dumps(settings, indent=2))
        # the act system message, as the user-level context file every turn reads
        memory = gemini_dir / "GEMINI.md"
        if turn.system:
            memory.write_text(turn.system, encoding="utf-8")
        elif memory.exists():
            memory.unlink()
        (home / "looprun-policy.toml").write_text(policy(turn), encoding="utf-8")
        # always named: a variable already set is one no .env file can change
        server = env.get("GOOGLE_GEMINI_BASE_URL") or SERVER
        return {"HOME": str(home), "GEMINI_CLI_HOME": str(home), "GOOGLE_GEMINI_BASE_URL": server}

    def refusal(self, workdir: Path) -> str:
        """Why Gemini CLI must not run on this tree ("" when it may): settings or an
        environment file of a trusted workspace (``.gemini/.env`` is looked for in every
        directory above the tree too)."""
        found = [name for name in WORKSPACE_SETTINGS if (workdir / name).is_file()]
        found += [
            str(parent / ".gemini" / ".env")
            for parent in workdir.parents
            if (parent / ".gemini" / ".env").is_file()
        ]
        if not found:
            return ""
        return (
            f"{', '.join(found)} would configure Gemini CLI (another server for the key, "
            "commands of its own): looprun does not run Gemini CLI on a tree that has them "
            "- remove them, or use another act.agent.cli"
        )

    def parse(self, output: str) -> Parsed:
        out = Parsed()
        result: Mapping[str, Any] | None = None
        calls: dict[str, tuple[str, Mapping[str, Any]]] = {}
        after_tools = False  # the next event starts a new model reply
        reply = ""  # the text of the current reply (streamed in deltas)
        for event in json_lines(output):
            kind = event.get("type")
            if kind == "init":
                out.session_id = str(event.get("session_id") or "")
                out.model = str(event.get("model") or "")
                out.turns = 1
            elif kind == "tool_use":
                if after_tools:  # a new model reply after the tools' results
                    out.turns, after_tools, reply = out.turns + 1, False, ""
                name = str(event.get("tool_name") or "?")
                out.tool_calls.append(name)
                calls[str(event.get("tool_id"))] = (name, event.get("parameters") or {})
            elif kind == "tool_result":
                after_tools = True
                if event.get("status") == "error":
                    text = str((event.get("error") or {}).get("message") or event.get("output"))
                    if any(r in text for r in _REFUSED):
                        out.denials.append(
                            _denial(*calls.get(str(event.get("tool_id")), ("?", {})))
                        )
            elif kind == "message" and event.get("role") == "assistant":
                if after_tools:
                    out.turns, after_tools, reply = out.turns + 1, False, ""
                reply += str(event.get("content") or "")
                out.final_message = reply
            elif kind == "result":
                result = event
        if result is None:
            out.error = "crashed"
            out.error_detail = "no result event in the output"
            return out
        stats = result.get("stats") or {}
        out.cached_tokens = as_int(stats.get("cached"))
        out.prompt_tokens = as_int(stats.get("input_tokens"))
        out.completion_tokens = as_int(stats.get("output_tokens"))
        if result.get("status") == "success":
            out.ok = True
            return out
        error = result.get("error") or {}
        message = str(error.get("message") or "")
        out.error = _classify(str(error.get("type") or ""), message)
        out.error_detail = " ".join(x for x in (str(error.get("type") or ""), message) if x)[:500]
        return out


def policy(turn: Turn) -> str:
    """The admin-tier policy for the turn, in Gemini CLI's TOML rule format."""
    tools = list(turn.spec.allow_tools or GEMINI_DEFAULT_TOOLS)
    lines = [
        "# written by looprun for one act turn",
        "[[rule]]",
        'toolName = "*"',
        'decision = "ask_user"',
        "priority = 1",
        'denyMessage = "not allowed by the loop template"',
        "",
        "[[rule]]",
        f"toolName = {json.dumps(tools)}",
        'decision = "allow"',
        "priority = 100",
    ]
    for key, value in gemini_shell_rules(turn.constraints.commands):
        lines += [
            "",
            "[[rule]]",
            'toolName = "run_shell_command"',
            f"{key} = {json.dumps(value)}",
            'decision = "allow"',
            "priority = 100",
        ]
    return "\n".join(lines) + "\n"


def _classify(kind: str, message: str) -> str:
    text = f"{kind} {message}".lower()
    if "turn" in text and ("limit" in text or "max" in text):
        return "max_turns"
    if any(s in text for s in ("401", "403", "api key", "unauthenticated", "permission_denied")):
        return "auth"
    if "429" in text or "quota" in text or "resource_exhausted" in text:
        return "rate_limit"
    if any(code in text for code in ("500", "502", "503", "504", "internal")):
        return "server"
    return "failed"


def _denial(name: str, args: Mapping[str, Any]) -> str:
    target = args.get("command") or args.get("file_path") or args.get("dir_path") or ""
    return f"{name}({str(target)[:200]})" if target else name
