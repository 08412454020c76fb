"""The real ``looprun`` CLI in a subprocess, as a user's shell would start it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml


def cli_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test's environment, with the interpreter running the tests first on PATH (it
    provides python, pytest and ruff to observers) and no ambient default model."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.pop("LOOPRUN_MODEL", None)
    env.update(extra or {})
    return env


def looprun(
    *args: str, cwd: Path, env: Mapping[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run the CLI to the end; ``env`` adds to :func:`cli_env`."""
    return subprocess.run(
        [sys.executable, "-m", "looprun", *args],
        cwd=cwd,
        env=cli_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start_looprun(
    *args: str, cwd: Path, text: bool = False, stdout: int = subprocess.DEVNULL
) -> subprocess.Popen:
    """Start the CLI in the background, in a process group of its own (as a shell starts
    a foreground job), so a test can signal the whole group; stderr is piped (and stdout,
    with ``stdout=subprocess.PIPE``)."""
    return subprocess.Popen(
        [sys.executable, "-m", "looprun", *args],
        cwd=cwd,
        env=cli_env(),
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=text,
        start_new_session=True,
    )


def scripted_run(template: str, *, intent: str, workdir: Path, script: Path) -> list[str]:
    """The CLI arguments of a run of ``template`` in ``workdir`` driven by a scripted model."""
    return [template, "--intent", intent, "--workdir", str(workdir), "--model", f"script:{script}"]


def scripted_json_run(
    tmp_path: Path, work: Path, template: str, turns: Sequence[Mapping[str, Any]], *options: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """A ``--json`` run of the template text ``template`` in ``work``, driven by the
    scripted model's ``turns``: the process and its summary (never a traceback)."""
    path, script = tmp_path / "t.yaml", tmp_path / "script.yaml"
    path.write_text(template)
    script.write_text(yaml.safe_dump(list(turns)))
    args = scripted_run(str(path), intent="x", workdir=work, script=script)
    proc = looprun(*args, "--json", *options, cwd=tmp_path)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc, json.loads(proc.stdout)
