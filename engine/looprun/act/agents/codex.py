"""Codex (npm ``@openai/codex``) headless: ``codex exec --json`` in the workspace-write sandbox.

In the run's OS sandbox Codex's own cannot start (it needs a user namespace, which a
sandboxed process may not make), and is not needed: the run's confines its commands
at least as tightly (the tree writable, no network), so it runs there with
``danger-full-access``.

Codex waits forever on an open standard input, so the actor closes it. It ignores
OPENAI_BASE_URL: a custom server is a ``model_providers`` entry given with ``-c``. Its
JSONL events report failure only as ``turn.failed`` (or ``error``); the token counts in
``turn.completed`` are the session's running total across ``exec resume``, so the actor
charges the difference from the last turn.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from looprun.act.agents.base import Parsed, Turn, as_int, json_lines

# the custom provider looprun defines when a server is named (LOOPRUN_CODEX_BASE_URL or
# OPENAI_BASE_URL); its key is read from OPENAI_API_KEY by Codex itself
PROVIDER = "looprun"


def _toml(value: str) -> str:
    return json.dumps(value)  # a TOML basic string is a JSON string


class Codex:
    cli = "codex"
    program = "codex"
    package = "@openai/codex"
    key_env = ("OPENAI_API_KEY", "CODEX_API_KEY")
    base_url_env = ("LOOPRUN_CODEX_BASE_URL", "OPENAI_BASE_URL")
    servers = ("https://api.openai.com/v1",)

    def command(self, program: str, turn: Turn) -> list[str]:
        cmd = [program, "exec"]
        if turn.session_id:
            cmd += ["resume", turn.session_id]
        cmd += ["--json", "--skip-git-repo-check"]
        mode = "danger-full-access" if turn.sandboxed else "workspace-write"
        if not turn.session_id:
            cmd += ["-s", mode]
        else:  # resume takes the sandbox as configuration
            cmd += ["-c", f'sandbox_mode="{mode}"']
        cmd += ["-c", 'approval_policy="never"']
        if turn.model:
            cmd += ["-m", turn.model]
        if turn.system:
            cmd += ["-c", f"developer_instructions={_toml(turn.system)}"]
        return [*cmd, "--", turn.prompt]

    def environment(self, turn: Turn, env: Mapping[str, str]) -> dict[str, str]:
        # A private TMPDIR: Codex refuses to set up its sandbox helper when its home lies
        # under the temporary directory, and a run's tree may well be under /tmp.
        tmp = turn.home / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        out = {"HOME": str(turn.home), "CODEX_HOME": str(turn.home / ".codex"), "TMPDIR": str(tmp)}
        base_url = env.get("LOOPRUN_CODEX_BASE_URL") or env.get("OPENAI_BASE_URL")
        if base_url:
            config = turn.home / ".codex" / "config.toml"
            config.parent.mkdir(parents=True, exist_ok=True)
            config.write_text(
                f"model_provider = {_toml(PROVIDER)}\n\n"
                f"[model_providers.{PROVIDER}]\n"
                f"name = {_toml('looprun server')}\n"
                f"base_url = {_toml(base_url)}\n"
                f'env_key = "OPENAI_API_KEY"\n'
                f'wire_api = "responses"\n'
                "request_max_retries = 1\n"
                "stream_max_retries = 1\n",
                encoding="utf-8",
            )
        return out

    def parse(self, output: str) -> Parsed:
        out = Parsed(cumulative=True)
        failed = ""
        completed = False
        for event in json_lines(output):
            kind = event.get("type")
            if kind == "thread.started":
                out.session_id = str(event.get("thread_id") or "")
            elif kind == "turn.started":
                out.turns += 1
            elif kind == "item.completed":
                item = event.get("item") or {}
                itype = item.get("type")
                if itype == "agent_message":
                    out.final_message = str(item.get("text") or "")
                elif itype in ("command_execution", "file_change", "mcp_tool_call", "web_search"):
                    out.tool_calls.append(itype)
                    if item.get("status") == "declined":
                        out.denials.append(_describe(item))
            elif kind == "turn.completed":
                completed = True
                usage = event.get("usage") or {}
                out.cached_tokens = as_int(usage.get("cached_input_tokens"))
                out.prompt_tokens = as_int(usage.get("input_tokens"))
                out.completion_tokens = as_int(usage.get("output_tokens"))
            elif kind == "turn.failed":
                failed = str((event.get("error") or {}).get("message") or "turn failed")
            elif kind == "error" and not failed:
                failed = str(event.get("message") or "error")
        if failed:
            out.error = _classify(failed)
            out.error_detail = failed[:500]
        elif not completed:
            out.error = "crashed"
            out.error_detail = "no turn.completed event in the output"
        else:
            out.ok = True
        return out


def _describe(item: Mapping[str, object]) -> str:
    if item.get("type") == "command_execution":
        return f"command({str(item.get('command') or '')[:200]})"
    return str(item.get("type"))


def _classify(message: str) -> str:
    """Codex reports a failure as text: the HTTP status, where it names one."""
    text = message.lower()
    if "401" in text or "403" in text or "unauthorized" in text:
        return "auth"
    if "429" in text or "rate limit" in text:
        return "rate_limit"
    if any(code in text for code in ("500", "502", "503", "504", "internal server")):
        return "server"
    return "failed"
