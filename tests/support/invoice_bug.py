"""The invoice sample's bug as the real-agent tests script it: the intent, the test that
reproduces it, and the lines of the fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tests.support.cli import looprun
from tests.support.fake_provider import FakeProvider

INTENT = (Path(__file__).resolve().parents[2] / "samples" / "invoice" / "intent.txt").read_text()
INTENT = INTENT.strip()

REPRO_TEST = """from invoice.totals import Line, summary


def test_summary_of_an_invoice_with_only_cancelled_lines():
    result = summary([Line("cancelled widget", 0, 1250)])
    assert result["total"] == 0
    assert result["average_unit_price"] == 0
"""
OLD = "    units = sum(line.quantity for line in lines)\n"
NEW = OLD + "    if units == 0:\n        return 0\n"

# a command that writes the reproducing test: the agent samples' templates do not allow it
WRITES_THE_TEST = (
    "python3 -c \"open('tests/test_cancelled_lines.py', 'w').write('def test_x(): assert 0')\""
)
CLAIM = "I wrote the failing test; the bug is reproduced."


def journal_of(work: Path) -> tuple[Path, list[dict]]:
    """The one run in ``work``: its directory and its journal's events."""
    (run,) = (work / ".looprun" / "runs").iterdir()
    return run, [json.loads(x) for x in (run / "journal.jsonl").read_text().splitlines()]


def assert_denied_command_retried(work: Path, summary: dict, stderr: str, denied: str) -> None:
    """A CLI turn whose only command was refused claimed success: the run retried and ran
    out of iterations, the test was never written, the refusal is on record."""
    assert summary["outcome"] == "exhausted", stderr
    assert not (work / "tests" / "test_cancelled_lines.py").exists()
    _run, events = journal_of(work)
    (turn,) = [e for e in events if e["event"] == "agent_turn"]
    assert turn["denials"] == 1 and turn["denied"][0].startswith(denied), turn["denied"]
    assert turn["final_message"] == CLAIM
    (iteration,) = [e for e in events if e["event"] == "iteration"]
    assert iteration["decision"]["action"] == "retry"


def run_sample(
    template: Path,
    work: Path,
    replies: Any,
    server_env: Callable[[FakeProvider], Mapping[str, str]],
    *args: str,
    bindir: str | None = None,
    timeout: float = 300,
) -> tuple[subprocess.CompletedProcess[str], dict]:
    """looprun on the invoice bug with an agent sample, the CLI talking to a loopback
    server scripted with ``replies``; ``server_env`` names that server (and the key) the
    CLI's way. PATH holds the CLI's ``bindir`` and this interpreter's bin (python, pytest
    and ruff for the checks)."""
    dirs = [d for d in (bindir, str(Path(sys.executable).parent)) if d]
    with FakeProvider(replies) as server:
        env = {"PATH": os.pathsep.join((*dirs, os.environ["PATH"])), **server_env(server)}
        proc = looprun(
            str(template), "--intent", INTENT, "--json", *args,
            cwd=work, env=env, timeout=timeout,
        )  # fmt: skip
    assert proc.stdout.strip(), proc.stderr
    return proc, json.loads(proc.stdout)
