"""End-to-end helpers: scratch copies of the samples and the real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"


def cli_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    # the samples' checks run `python -m pytest`: this interpreter's environment
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.pop("LOOPRUN_MODEL", None)
    if extra:
        env.update(extra)
    return env


def looprun(
    *args: str, env: Mapping[str, str] | None = None, cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "looprun", *args],
        capture_output=True,
        text=True,
        env=cli_env(env),
        cwd=cwd,
        timeout=timeout,
    )


def start(*args: str, env: Mapping[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "looprun", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(env),
        start_new_session=True,
    )


def git_init(path: Path) -> Path:
    def git(*a: str) -> None:
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *a],
            cwd=path,
            check=True,
            capture_output=True,
        )

    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-q", "-m", "init")
    return path


def sample_copy(name: str, tmp: Path) -> Path:
    sys.path.insert(0, str(SAMPLES))
    try:
        import demo  # the samples' own scratch-copy helper
    finally:
        sys.path.remove(str(SAMPLES))
    return demo.scratch_copy(name, tmp)


def run_dirs(workdir: Path) -> list[Path]:
    return sorted((workdir / ".looprun" / "runs").iterdir())


def summary_of(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert proc.stdout.strip(), proc.stderr
    return json.loads(proc.stdout)


def prompt_of(run_dir: str | Path, iteration: int) -> str:
    """The user messages of the first model request of ``iteration``, as the model got them
    (the run's exchange log)."""
    lines = (Path(run_dir) / "exchanges.jsonl").read_text().splitlines()
    first = next(e for e in map(json.loads, lines) if e["iteration"] == iteration)
    return "\n".join(str(m.get("content", "")) for m in first["request"] if m.get("role") == "user")


def journal_events(run_dir: str | Path, kind: str) -> list[dict[str, Any]]:
    """The events of one kind in a run's journal, in order."""
    lines = (Path(run_dir) / "journal.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == kind]


def tiered_bugfix(tmp: Path) -> str:
    """``bugfix`` whose tests observer always runs its narrow tiers: on a small suite a
    narrow run costs about what a whole run costs, so by default they would be skipped
    once measured, and a test about the tiers would see whole runs only."""
    path = tmp / "tiered.yaml"
    path.write_text(
        "looprun: 1\nname: tiered\nextends: bugfix\nobserve:\n  tests:\n    narrow_share: false\n",
        encoding="utf-8",
    )
    return str(path)


def scripted_bugfix(
    work: Path,
    turns: list[dict[str, Any]],
    intent: str,
    *extra: str,
    env: Mapping[str, str] | None = None,
    timeout: float = 1200,
    template: str = "bugfix",
) -> dict[str, Any]:
    """`looprun bugfix --json` (or ``template``) on ``work`` with a scripted model (its
    script beside the repository); the summary, with the run's stderr under ``stderr``."""
    script = work.parent / "script.yaml"
    script.write_text(yaml.safe_dump(turns, sort_keys=False))
    proc = looprun(
        template,
        "--intent",
        intent,
        "--workdir",
        str(work),
        "--model",
        f"script:{script}",
        "--json",
        *extra,
        env=env,
        timeout=timeout,
    )
    return {**summary_of(proc), "stderr": proc.stderr}


# tests of the backfill_units sample that run its code and assert nothing it would miss
VACUOUS_UNIT_TESTS = """\
from units.temperature import celsius_to_fahrenheit, fahrenheit_to_celsius, label
from units.wind import beaufort, kmh_to_knots


def test_labels():
    for value in (-5, 3, 20, 30):
        label(value)


def test_conversions():
    celsius_to_fahrenheit(10)
    assert fahrenheit_to_celsius(50) or True
    kmh_to_knots(10)
    for speed in (0.5, 30, 150):
        assert beaufort(speed) is not None
"""


def scripted_backfill(tmp: Path, tests: str, *extra: str) -> tuple[dict[str, Any], Path]:
    """`looprun test_backfill --json` on a copy of the backfill_units sample, its targets
    the two unit modules, with a model that writes ``tests`` to tests/test_cover.py and then
    changes nothing: the summary and the run directory."""
    workdir = sample_copy("backfill_units", tmp)
    write = {"name": "write_file", "arguments": {"path": "tests/test_cover.py", "content": tests}}
    turns: list[dict[str, Any]] = [{"tool_calls": [write]}, {"text": "Tests written."}]
    turns += [{"text": "The tests are fine as they are."}] * 6
    script = tmp / "script.json"
    script.write_text(json.dumps(turns))
    proc = looprun(
        "test_backfill", "--intent", "Raise the coverage of the unit conversions.",
        "--set", "target=units/temperature.py,units/wind.py", *extra,
        "--workdir", str(workdir), "--model", f"script:{script}", "--json",
        timeout=600,
    )  # fmt: skip
    summary = summary_of(proc)
    return summary, Path(summary["run_dir"])
