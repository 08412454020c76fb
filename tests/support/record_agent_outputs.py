"""Record the real agent CLIs' output for the parser tests (tests/agents/recorded/).

    python -m tests.support.record_agent_outputs claude|codex

Each scenario runs the installed, pinned binary the way the actor does, against the
loopback server with scripted replies, and saves its raw output with the temporary paths
replaced by /repo and /agent-home. Re-run it when a pin in agent-clis.txt moves.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from tests.support.agent_clis import PINNED, search_path
from tests.support.agent_server import AgentScript, Step, call, say
from tests.support.fake_provider import (
    Canned,
    FakeProvider,
    Recorded,
    anthropic_error,
    openai_error,
)

OUT = Path(__file__).resolve().parents[1] / "agents" / "recorded"

Scenario = tuple[Callable[[Path], list[Step]], Callable[[Recorded], Canned] | None]


def _claude_scenarios() -> dict[str, Scenario]:
    def edit(w: Path) -> list[Step]:
        a = str(w / "a.py")
        return [
            call("Read", {"file_path": a}),
            call("Edit", {"file_path": a, "old_string": "x = 1", "new_string": "x = 2"}),
            say("Changed x to 2."),
        ]

    def deny(w: Path) -> list[Step]:
        cmd = "python3 -c \"open('a.py', 'w').write('x = 3')\""
        return [call("Bash", {"command": cmd, "description": "write"}), say("Done it.")]

    def max_turns(w: Path) -> list[Step]:
        return [call("Read", {"file_path": str(w / "a.py")})] * 4

    def unauthorised(r: Recorded) -> Canned:
        return anthropic_error(401, "authentication_error", "invalid x-api-key")

    return {
        "edit": (edit, None),
        "denied": (deny, None),
        "max_turns": (max_turns, None),
        "auth_401": (lambda w: [], unauthorised),
    }


def record_claude() -> None:
    program = shutil.which("claude", path=search_path())
    assert program, "claude is not installed"
    version = PINNED["@anthropic-ai/claude-code"]
    dest = OUT / f"claude-code-{version}"
    dest.mkdir(parents=True, exist_ok=True)
    for name, (steps, responder) in _claude_scenarios().items():
        work = Path(tempfile.mkdtemp(prefix="rec-work-"))
        home = Path(tempfile.mkdtemp(prefix="rec-home-"))
        (work / "a.py").write_text("x = 1\n")
        script = AgentScript(steps(work))
        with FakeProvider(responder or script) as server:
            env = {
                "PATH": os.environ["PATH"],
                "HOME": str(home),
                "CLAUDE_CONFIG_DIR": str(home / ".claude"),
                "CLAUDE_CODE_MAX_RETRIES": "0",
                "ANTHROPIC_BASE_URL": server.url,
                "ANTHROPIC_API_KEY": "sk-ant-recording",
            }
            cmd = [
                program, "-p", "--output-format", "stream-json", "--verbose",
                "--permission-mode", "acceptEdits", "--tools", "Read,Edit,Bash",
                "--allowedTools", "Read,Edit,Bash(python -m pytest:*)", "--max-turns", "3",
                "--setting-sources", "", "--strict-mcp-config", "--model", "claude-sonnet-4-5",
                "--", "Set x to 2 in a.py",
            ]  # fmt: skip
            proc = subprocess.run(
                cmd, cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                text=True, timeout=180,
            )  # fmt: skip
        text = proc.stdout.replace(str(work), "/repo").replace(str(home), "/agent-home")
        text = re.sub(r"/tmp/[\w./-]+", "/tmp/...", text)  # sockets and other scratch
        (dest / f"{name}.jsonl").write_text(text)
        (dest / f"{name}.exit").write_text(f"{proc.returncode}\n")
        shutil.rmtree(work), shutil.rmtree(home)
        print(name, proc.returncode, len(text))


def record_codex() -> None:
    program = shutil.which("codex", path=search_path())
    assert program, "codex is not installed"
    dest = OUT / f"codex-{PINNED['@openai/codex']}"
    dest.mkdir(parents=True, exist_ok=True)

    def unauthorised(r: Recorded) -> Canned:
        return openai_error(401, "Incorrect API key provided", "invalid_request_error")

    scenarios: dict[str, Scenario] = {
        "edit": (lambda w: [call("exec_command", {"cmd": "printf 'x = 2\\n' > a.py"}),
                            say("Changed x to 2.")], None),
        "auth_401": (lambda w: [], unauthorised),
    }  # fmt: skip
    for name, (steps, responder) in scenarios.items():
        work = Path(tempfile.mkdtemp(prefix="rec-work-"))
        home = Path(tempfile.mkdtemp(prefix="rec-home-"))
        (work / "a.py").write_text("x = 1\n")
        (home / "tmp").mkdir()
        script = AgentScript(steps(work), model="gpt-5-codex")
        with FakeProvider(responder or script) as server:
            (home / ".codex").mkdir()
            (home / ".codex" / "config.toml").write_text(
                'model_provider = "looprun"\n[model_providers.looprun]\nname = "loopback"\n'
                f'base_url = "{server.url}/v1"\nenv_key = "OPENAI_API_KEY"\n'
                'wire_api = "responses"\nrequest_max_retries = 0\nstream_max_retries = 0\n'
            )
            env = {
                "PATH": os.environ["PATH"],
                "HOME": str(home),
                "CODEX_HOME": str(home / ".codex"),
                "TMPDIR": str(home / "tmp"),
                "OPENAI_API_KEY": "sk-recording",
            }
            cmd = [
                program, "exec", "--json", "--skip-git-repo-check", "-s", "workspace-write",
                "-c", 'approval_policy="never"', "-m", "gpt-5-codex", "--", "Set x to 2 in a.py",
            ]  # fmt: skip
            proc = subprocess.run(
                cmd, cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                text=True, timeout=180,
            )  # fmt: skip
        text = proc.stdout.replace(str(work), "/repo").replace(str(home), "/agent-home")
        text = re.sub(r"/tmp/[\w./-]+", "/tmp/...", text)
        (dest / f"{name}.jsonl").write_text(text)
        (dest / f"{name}.exit").write_text(f"{proc.returncode}\n")
        shutil.rmtree(work), shutil.rmtree(home)
        print(name, proc.returncode, len(text))


if __name__ == "__main__":
    {"claude": record_claude, "codex": record_codex}[sys.argv[1]]()
