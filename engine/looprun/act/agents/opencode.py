"""opencode (npm ``opencode-ai``) headless: ``opencode run --format json``.

Everything opencode is allowed to do is in a config file looprun writes under the run's
agent home and names with OPENCODE_CONFIG: the permission rules (``"*": "deny"``, the
template's tools allowed, its commands as ``bash`` patterns), the provider and the model.
Project configuration (an ``opencode.json`` or ``.opencode/`` in the repository) is not
read (OPENCODE_DISABLE_PROJECT_CONFIG), so a repository cannot grant itself more.

opencode installs its plugin SDK from npm into every config directory it reads, in the
background of every start, unless that directory's package files already list it; the
config directory is seeded with them so a turn never fetches anything.

Its JSON events carry no final report: a turn succeeded when it exits 0 without an
``error`` event. Each model call ends in a ``step_finish`` with that call's tokens and
cost, so usage is per call, also across ``--session``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from looprun.act.agents.base import Parsed, Turn, as_int, http_error, json_lines
from looprun.errors import LooprunError
from looprun.template.agents import OPENCODE_DEFAULT_TOOLS, opencode_bash_rule

VERSION = "1.18.33"  # the pinned release; its plugin SDK is declared at the same version
PROVIDER = "looprun"  # the provider looprun defines when a server is named
DENIED = "The user has specified a rule which prevents you from using this specific tool call"


class OpenCode:
    cli = "opencode"
    program = "opencode"
    package = "opencode-ai"
    key_env = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
    base_url_env = ("LOOPRUN_OPENCODE_BASE_URL", "OPENAI_BASE_URL")
    servers = ("https://api.openai.com/v1", "https://api.anthropic.com/v1")

    def command(self, program: str, turn: Turn) -> list[str]:
        cmd = [program, "run", "--format", "json"]
        if turn.session_id:
            cmd += ["--session", turn.session_id]
        return [*cmd, "--", turn.prompt]  # the model is in the config file

    def environment(self, turn: Turn, env: Mapping[str, str]) -> dict[str, str]:
        home = turn.home
        config_dir = home / ".config" / "opencode"
        (config_dir / "node_modules").mkdir(parents=True, exist_ok=True)
        sdk = {"@opencode-ai/plugin": VERSION}
        (config_dir / "package.json").write_text(json.dumps({"dependencies": sdk}))
        lock = {"lockfileVersion": 3, "packages": {"": {"dependencies": sdk}}}
        (config_dir / "package-lock.json").write_text(json.dumps(lock))
        config: dict[str, Any] = {
            "$schema": "https://opencode.ai/config.json",
            "autoupdate": False,
            "share": "disabled",
            "permission": permissions(turn),
        }
        out = {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_DATA_HOME": str(home / ".local" / "share"),
            "XDG_CACHE_HOME": str(home / ".cache"),
            "XDG_STATE_HOME": str(home / ".local" / "state"),
            "OPENCODE_CONFIG": str(home / "opencode.json"),
            "OPENCODE_DISABLE_PROJECT_CONFIG": "1",
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_SHARE": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_CLAUDE_CODE": "1",
        }
        base_url = env.get("LOOPRUN_OPENCODE_BASE_URL") or env.get("OPENAI_BASE_URL")
        if base_url:
            name = _server_model(turn.model)
            config["provider"] = {
                PROVIDER: {
                    "npm": "@ai-sdk/openai-compatible",  # bundled in the binary
                    "name": "looprun server",
                    "options": {"baseURL": base_url, "apiKey": "{env:OPENAI_API_KEY}"},
                    "models": {name: {"name": name}},
                }
            }
            config["model"] = f"{PROVIDER}/{name}"
            out["OPENCODE_DISABLE_MODELS_FETCH"] = "1"
        elif turn.model:
            config["model"] = turn.model
        if turn.spec.max_turns is not None:
            config["agent"] = {"build": {"steps": turn.spec.max_turns}}
        if turn.system:
            instructions = home / "looprun-instructions.md"
            instructions.write_text(turn.system, encoding="utf-8")
            config["instructions"] = [str(instructions)]
        (home / "opencode.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
        return out

    def parse(self, output: str) -> Parsed:
        out = Parsed()
        error: Mapping[str, Any] | None = None
        for event in json_lines(output):
            kind = event.get("type")
            if isinstance(event.get("sessionID"), str):
                out.session_id = event["sessionID"]
            part = event.get("part") or {}
            if kind == "tool_use":
                out.tool_calls.append(str(part.get("tool") or "?"))
                state = part.get("state") or {}
                if state.get("status") == "error" and DENIED in str(state.get("error") or ""):
                    out.denials.append(_denial(part))
            elif kind == "text" and part.get("text"):
                out.final_message = str(part["text"])
            elif kind == "step_finish":
                out.turns += 1
                tokens = part.get("tokens") or {}
                cache = tokens.get("cache") or {}
                out.cached_tokens += as_int(cache.get("read"))
                out.cache_write_tokens += as_int(cache.get("write"))
                out.prompt_tokens += (
                    as_int(tokens.get("input"))
                    + as_int(cache.get("read"))
                    + as_int(cache.get("write"))
                )
                out.completion_tokens += as_int(tokens.get("output")) + as_int(
                    tokens.get("reasoning")
                )
                cost = part.get("cost")
                if isinstance(cost, (int, float)) and cost > 0:
                    out.cost_usd = (out.cost_usd or 0.0) + float(cost)
            elif kind == "error":
                error = event.get("error") or {}
        if error is not None:
            data = error.get("data") or {}
            status = data.get("statusCode")
            name = str(error.get("name") or "")
            if isinstance(status, int):
                out.error = http_error(status)
            elif "Auth" in name:
                out.error = "auth"
            else:
                out.error = "failed"
            out.error_detail = " ".join(str(x) for x in (name, status, data.get("message")) if x)[
                :500
            ]
            return out
        if out.turns == 0:
            out.error = "crashed"
            out.error_detail = "no step_finish event in the output"
            return out
        out.ok = True
        return out


def permissions(turn: Turn) -> dict[str, Any]:
    """opencode's permission rules for the turn: everything denied but the template's
    tools, and ``bash`` only for its command patterns (the last matching rule wins)."""
    rules: dict[str, Any] = {"*": "deny"}
    for tool in turn.spec.allow_tools or OPENCODE_DEFAULT_TOOLS:
        rules[tool] = "allow"
    commands = [r for p in turn.constraints.commands if (r := opencode_bash_rule(p))]
    if commands:
        rules["bash"] = {"*": "deny", **{c: "allow" for c in commands}}
    return rules


def _server_model(model: str) -> str:
    """The model name on a named server (it speaks Chat Completions): ``openai/NAME`` or
    a bare name."""
    name = model.removeprefix("openai/")
    if not name or "/" in name:
        raise LooprunError(
            "act.agent.cli opencode with a server of its own (LOOPRUN_OPENCODE_BASE_URL or "
            f"OPENAI_BASE_URL) runs an OpenAI-compatible model: give --model openai:<model>"
            f"{f', not {model!r}' if model else ''}"
        )
    return name


def _denial(part: Mapping[str, Any]) -> str:
    """``bash(rm -rf x)`` / ``edit(path)``: the tool and what it was asked to touch."""
    name = str(part.get("tool") or "?")
    args = (part.get("state") or {}).get("input") or {}
    target = args.get("command") or args.get("filePath") or args.get("path") or ""
    return f"{name}({str(target)[:200]})" if target else name
