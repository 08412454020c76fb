"""Record the real agent CLIs' output for the parser tests (tests/agents/recorded/).

    python -m tests.support.record_agent_outputs claude|codex|aider|opencode|gemini

Each scenario has the actor run the installed, pinned binary exactly as looprun does,
against the loopback server with scripted replies, and keeps its raw output (the actor's
artifact) with the temporary paths replaced by /repo and /run. Re-run it when a pin in
agent-clis.txt moves.
"""

from __future__ import annotations

import os
import re
import shutil
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
    canned,
    openai_error,
)
from tests.support.git_repos import git_repo

from looprun.act.agents.actor import AgentActor
from looprun.loop.ports import AgentRequest
from looprun.template.model import AgentSpec, Constraints

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


def _codex_scenarios() -> dict[str, Scenario]:
    def unauthorised(r: Recorded) -> Canned:
        return openai_error(401, "Incorrect API key provided", "invalid_request_error")

    def edit(w: Path) -> list[Step]:
        return [call("exec_command", {"cmd": "printf 'x = 2\\n' > a.py"}), say("Changed x to 2.")]

    return {"edit": (edit, None), "auth_401": (lambda w: [], unauthorised)}


def _aider_scenarios() -> dict[str, Scenario]:
    def edit(w: Path) -> list[Step]:
        block = "a.py\n```python\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n```"
        return [say(f"Changed x to 2.\n\n{block}")]  # a.py: in the chat, the prompt names it

    def ignored(w: Path) -> list[Step]:
        block = "notes.txt\n```\n<<<<<<< SEARCH\n=======\nsecret\n>>>>>>> REPLACE\n```"
        return [say(f"Writing the notes.\n\n{block}")]

    def unauthorised(r: Recorded) -> Canned:
        return openai_error(401, "Incorrect API key provided", "invalid_request_error")

    return {
        "edit": (edit, None),
        "gitignored": (ignored, None),
        "auth_401": (lambda w: [], unauthorised),
    }


def _opencode_scenarios() -> dict[str, Scenario]:
    def edit(w: Path) -> list[Step]:
        a = str(w / "a.py")
        return [
            call("read", {"filePath": a}),
            call("edit", {"filePath": a, "oldString": "x = 1", "newString": "x = 2"}),
            say("Changed x to 2."),
        ]

    def deny(w: Path) -> list[Step]:
        cmd = "python3 -c \"open('a.py', 'w').write('x = 3')\""
        return [call("bash", {"command": cmd, "description": "write"}), say("Done it.")]

    def unauthorised(r: Recorded) -> Canned:
        return openai_error(401, "Incorrect API key provided", "invalid_request_error")

    return {"edit": (edit, None), "denied": (deny, None), "auth_401": (lambda w: [], unauthorised)}


def _gemini_scenarios() -> dict[str, Scenario]:
    def edit(w: Path) -> list[Step]:
        a = str(w / "a.py")
        return [
            call("read_file", {"file_path": a}),
            call(
                "replace",
                {
                    "file_path": a,
                    "old_string": "x = 1",
                    "new_string": "x = 2",
                    "instruction": "x=2",
                },
            ),
            say("Changed x to 2."),
        ]

    def deny(w: Path) -> list[Step]:
        cmd = "python3 -c \"open('a.py', 'w').write('x = 3')\""
        return [
            call("run_shell_command", {"command": cmd, "description": "write"}),
            say("Done it."),
        ]

    def max_turns(w: Path) -> list[Step]:
        return [call("read_file", {"file_path": str(w / "a.py")})] * 5

    def bad_key(r: Recorded) -> Canned:  # the Gemini API answers a bad key with a 400
        reason = {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "API_KEY_INVALID",
            "domain": "googleapis.com",
        }
        message = "API key not valid. Please pass a valid API key."
        error = {"code": 400, "message": message, "status": "INVALID_ARGUMENT", "details": [reason]}
        return canned(400, {"error": error})

    return {
        "edit": (edit, None),
        "denied": (deny, None),
        "max_turns": (max_turns, None),
        "bad_key": (lambda w: [], bad_key),
    }


def record(cli: str) -> None:
    """Every scenario of ``cli`` run by the actor itself, exactly as looprun runs it."""
    package, scenarios, model, key_env = {
        "claude-code": ("@anthropic-ai/claude-code", _claude_scenarios(), "claude-sonnet-4-5",
                        "ANTHROPIC_API_KEY"),
        "codex": ("@openai/codex", _codex_scenarios(), "gpt-5-codex", "OPENAI_API_KEY"),
        "aider": ("aider-chat", _aider_scenarios(), "openai/gpt-4o", "OPENAI_API_KEY"),
        "opencode": ("opencode-ai", _opencode_scenarios(), "gpt-4.1", "OPENAI_API_KEY"),
        "gemini": ("@google/gemini-cli", _gemini_scenarios(), "gemini-2.5-pro", "GEMINI_API_KEY"),
    }[cli]  # fmt: skip
    dest = OUT / f"{cli}-{PINNED[package]}"
    dest.mkdir(parents=True, exist_ok=True)
    for name, (steps, responder) in scenarios.items():
        work = Path(tempfile.mkdtemp(prefix="rec-work-"))
        run = Path(tempfile.mkdtemp(prefix="rec-run-"))
        (work / "a.py").write_text("x = 1\n")
        if cli == "aider":  # aider works in a git repository (and honours its .gitignore)
            (work / ".gitignore").write_text("notes.txt\n")
            git_repo(work)
        script = AgentScript(steps(work), model=model)
        with FakeProvider(responder or script) as server:
            env = {
                "PATH": search_path(),
                key_env: "sk-recording-key",
                "ANTHROPIC_BASE_URL": server.url,
                "LOOPRUN_CODEX_BASE_URL": server.url + "/v1",
                "LOOPRUN_AIDER_BASE_URL": server.url + "/v1",
                "LOOPRUN_AIDER": os.environ.get("LOOPRUN_AIDER", ""),
                "LOOPRUN_OPENCODE_BASE_URL": server.url + "/v1",
                "GOOGLE_GEMINI_BASE_URL": server.url,
            }
            rules = cli in ("claude-code", "opencode", "gemini")  # command rules it can take
            actor = AgentActor(
                AgentSpec(cli=cli, max_turns=3 if cli in ("claude-code", "gemini") else None),
                Constraints(commands=("python -m pytest *",) if rules else ()),
                workdir=work,
                run_dir=run,
                artifacts=run / "artifacts",
                model=model,
                env=env,
            )
            report = actor.act(
                AgentRequest("Set x to 2 in a.py", "", iteration=1, task_id="t", timeout_s=180)
            )
        text = (run / "artifacts" / report.artifact).read_text()
        text = text.replace(str(work), "/repo").replace(str(run), "/run")
        text = re.sub(r"/tmp/[\w./-]+", "/tmp/...", text)  # sockets and other scratch
        (dest / f"{name}.jsonl").write_text(text)
        (dest / f"{name}.exit").write_text(f"{report.exit_code}\n")
        shutil.rmtree(work), shutil.rmtree(run)
        print(name, report.exit_code, report.error, len(text))


if __name__ == "__main__":
    record({"claude": "claude-code"}.get(sys.argv[1], sys.argv[1]))
