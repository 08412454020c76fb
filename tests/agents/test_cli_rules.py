"""The rules looprun hands opencode and Gemini CLI, as the files each reads: what a
template allows becomes the CLI's own permission config / policy, everything else is
refused there. (The real binaries honour them: tests/agents/test_real_opencode.py and
test_real_gemini.py.)"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from looprun.act.agents.base import Turn
from looprun.act.agents.gemini import Gemini
from looprun.act.agents.opencode import OpenCode
from looprun.errors import LooprunError
from looprun.template.model import AgentSpec, Constraints

COMMANDS = ("python -m pytest *", "ruff check")


def _turn(tmp_path: Path, cli: str, model: str = "", **spec: object) -> Turn:
    return Turn(
        spec=AgentSpec(cli=cli, **spec),  # type: ignore[arg-type]
        constraints=Constraints(commands=COMMANDS),
        prompt="fix it",
        system="Be careful.",
        model=model,
        session_id="",
        new_session_id="0b1c2d3e-0000-4000-8000-000000000000",
        home=tmp_path / "home",
        workdir=tmp_path / "work",
    )


def test_opencode_config_denies_all_but_the_templates_tools_and_commands(tmp_path: Path) -> None:
    turn = _turn(tmp_path, "opencode", "openai/gpt-4.1", max_turns=12)
    env = OpenCode().environment(turn, {"LOOPRUN_OPENCODE_BASE_URL": "http://127.0.0.1:9/v1"})
    config = json.loads(Path(env["OPENCODE_CONFIG"]).read_text())
    assert config["permission"] == {
        "*": "deny",
        "read": "allow",
        "edit": "allow",
        "glob": "allow",
        "grep": "allow",
        "list": "allow",
        "bash": {"*": "deny", "python -m pytest *": "allow", "ruff check": "allow"},
    }
    assert config["agent"] == {"build": {"steps": 12}}
    # a server of its own: the bundled OpenAI-compatible client, the key from the env
    assert config["model"] == "looprun/gpt-4.1"
    provider = config["provider"]["looprun"]
    assert provider["npm"] == "@ai-sdk/openai-compatible"
    assert provider["options"]["apiKey"] == "{env:OPENAI_API_KEY}"
    assert env["OPENCODE_DISABLE_PROJECT_CONFIG"] == "1"
    assert Path(config["instructions"][0]).read_text() == "Be careful."
    # its plugin SDK is declared, so opencode does not fetch it from npm at start
    lock = json.loads((turn.home / ".config" / "opencode" / "package-lock.json").read_text())
    assert "@opencode-ai/plugin" in lock["packages"][""]["dependencies"]
    assert OpenCode().command("opencode", turn) == [
        "opencode", "run", "--format", "json", "--", "fix it"
    ]  # fmt: skip


def test_opencode_on_a_server_of_its_own_needs_an_openai_model(tmp_path: Path) -> None:
    turn = _turn(tmp_path, "opencode", "anthropic/claude-sonnet-4-5")
    with pytest.raises(LooprunError, match="give --model openai:<model>"):
        OpenCode().environment(turn, {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})


def test_gemini_policy_allows_the_templates_tools_and_commands_only(tmp_path: Path) -> None:
    turn = _turn(tmp_path, "gemini", max_turns=7, allow_tools=("read_file", "replace"))
    env = Gemini().environment(turn, {"GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9"})
    assert env["GEMINI_CLI_HOME"] == str(turn.home)
    settings = json.loads((turn.home / ".gemini" / "settings.json").read_text())
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert settings["model"]["maxSessionTurns"] == 7
    assert (turn.home / ".gemini" / "GEMINI.md").read_text() == "Be careful."
    rules = tomllib.loads((turn.home / "looprun-policy.toml").read_text())["rule"]
    catch_all, tools, *shell = rules
    assert (catch_all["toolName"], catch_all["decision"]) == ("*", "ask_user")
    assert tools["toolName"] == ["read_file", "replace"] and tools["decision"] == "allow"
    assert all(r["priority"] > catch_all["priority"] for r in (tools, *shell))

    def allowed(command: str) -> bool:  # as Gemini CLI matches: from the command's start
        args = '"command":' + json.dumps(command) + ',"description":"x"'
        return any(re.search('"command":"' + r["commandRegex"], args) for r in shell)

    assert allowed("python -m pytest") and allowed("python -m pytest -q tests")
    assert allowed('python -m pytest -k "a b"') and allowed("ruff check")
    assert not allowed("python -m pytestx") and not allowed("ruff check --fix")
    assert not allowed("rm -rf tests")
    cmd = Gemini().command("gemini", turn)
    assert cmd[cmd.index("--approval-mode") + 1] == "default"
    assert cmd[cmd.index("--admin-policy") + 1] == str(turn.home / "looprun-policy.toml")
    assert cmd[cmd.index("--session-id") + 1] == turn.new_session_id
    assert cmd[-2:] == ["--prompt", "fix it"]
