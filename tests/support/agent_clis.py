"""Where the real agent CLIs are for the tests that run them, pinned in agent-clis.txt
(npm) and agent-pypi.txt (PyPI).

They are found on PATH (``.ci/run`` installs the npm ones globally), in the directory
named by LOOPRUN_AGENT_BIN, or, for Aider (installed in a virtualenv of its own), at the
executable LOOPRUN_AIDER names. Missing, such a test is skipped on a developer's machine
and fails in CI (CI=true): a CI run that silently skipped them would prove nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from looprun.act.agents.actor import AgentActor
from looprun.loop.ports import AgentReport, AgentRequest
from looprun.template.model import AgentSpec, Constraints

PINNED = {
    line.rsplit("@", 1)[0]: line.rsplit("@", 1)[1]
    for line in (Path(__file__).with_name("agent-clis.txt")).read_text().splitlines()
    if line.strip() and not line.startswith("#")
}
PINNED |= {
    line.split("==", 1)[0]: line.split("==", 1)[1].strip()
    for line in (Path(__file__).with_name("agent-pypi.txt")).read_text().splitlines()
    if line.strip() and not line.startswith("#")
}
PACKAGES = {
    "claude": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
    "aider": "aider-chat",
    "opencode": "opencode-ai",
    "gemini": "@google/gemini-cli",
}
# a CLI installed in a virtualenv of its own: its executable, named by looprun's setting
SETTINGS = {"aider": "LOOPRUN_AIDER"}


def search_path() -> str:
    extra = os.environ.get("LOOPRUN_AGENT_BIN", "")
    return os.pathsep.join(p for p in (extra, os.environ.get("PATH", "")) if p)


def require(program: str) -> str:
    """The directory holding ``program`` at its pinned version; skip (or fail in CI)."""
    package = PACKAGES[program]
    named = os.environ.get(SETTINGS.get(program, ""), "")
    found = shutil.which(named) if named else shutil.which(program, path=search_path())
    if found is None:
        why = f"`{program}` ({package}@{PINNED[package]}) is not installed"
        if os.environ.get("CI"):
            pytest.fail(why + ": .ci/run installs it; CI must run these tests")
        pytest.skip(why)
    out = subprocess.run(
        [found, "--version"], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60
    )
    assert PINNED[package] in out.stdout, f"{found}: {out.stdout!r}, pinned {PINNED[package]}"
    return str(Path(found).parent)


def two_turns_of_one_session(
    cli: str, model: str, env: dict[str, str], tmp_path: Path
) -> tuple[AgentReport, AgentReport]:
    """Two act turns of ``cli`` in one session (``session: resume``), by the actor as
    looprun runs it: the second continues the first's session."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    actor = AgentActor(
        AgentSpec(cli=cli, session="resume"),
        Constraints(),
        workdir=work,
        run_dir=tmp_path / "run",
        artifacts=tmp_path / "run" / "artifacts",
        model=model,
        env=env,
    )
    first = actor.act(AgentRequest("first", "", iteration=1, task_id="t", timeout_s=120))
    second = actor.act(
        AgentRequest(
            "second", "", iteration=2, task_id="t", timeout_s=120,
            session_id=first.session_id, session_usage=first.session_usage,
        )
    )  # fmt: skip
    return first, second
