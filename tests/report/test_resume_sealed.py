"""A local resume goes on with the invocation the engine sealed in git when it wrote
``run.json``: a run.json rewritten between the interruption and the resume (as a command
could, without bubblewrap) is refused before anything runs, and so is a template file
that changed, unless the command line names it (real clones, the real CLI)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from tests.report.test_bundle import _git, _origin
from tests.support.cli import looprun


def _paused(tmp_path: Path) -> tuple[Path, str]:
    """A run paused for approval of its edit, in a clone of its own."""
    work = tmp_path / "job"
    _git(tmp_path, "clone", "-q", str(_origin(tmp_path)), str(work))
    paused = looprun(
        "loops/mini.yaml", "--intent", "add() subtracts",
        "--model", "script:loops/script.yaml", "--json", cwd=work,
    )  # fmt: skip
    assert paused.returncode == 5, paused.stderr
    return work, json.loads(paused.stdout)["run_id"]


def _refused(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    for word in words:
        assert word in proc.stderr, proc.stderr


HOSTILE: dict[str, dict[str, Any]] = {
    "commit": {"commit": True, "no_verify": True},
    "executor": {"executor": "ray:10.0.0.1:10001", "sync_remote": "https://attacker.invalid/r"},
}


@pytest.mark.parametrize("edit", sorted(HOSTILE))
def test_run_json_rewritten_before_the_resume_is_refused(edit: str, tmp_path: Path) -> None:
    work, run_id = _paused(tmp_path)
    path = work / ".looprun" / "runs" / run_id / "run.json"
    honest = path.read_text()
    head, waiting = _git(work, "rev-parse", "HEAD"), (work / "src" / "calc.py").read_text()
    path.write_text(json.dumps({**json.loads(honest), **HOSTILE[edit]}))
    proc = looprun("resume", run_id, "--approve", "--json", cwd=work)
    _refused(proc, f"{path}: run.json differs", f"refs/looprun-sealed/{run_id}", f"{edit} is ")
    # nothing ran: the edit still waits, no commit was made
    assert (work / "src" / "calc.py").read_text() == waiting
    assert _git(work, "rev-parse", "HEAD") == head
    # put back as it was, the run resumes, shows what it goes on with, and commits nothing
    path.write_text(honest)
    resumed = looprun("resume", run_id, "--approve", "--json", cwd=work)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["outcome"] == "done"
    shown = [ln for ln in resumed.stderr.splitlines() if ln.startswith("resuming with:")]
    assert len(shown) == 1, resumed.stderr
    assert f"template {work / 'loops' / 'mini.yaml'} (sha256 " in shown[0]
    assert "executor local, sync remote none, commit no" in shown[0]
    assert _git(work, "rev-parse", "HEAD") == head


def test_a_changed_template_is_refused_unless_named(tmp_path: Path) -> None:
    work, run_id = _paused(tmp_path)
    template = work / "loops" / "mini.yaml"
    waiting = (work / "src" / "calc.py").read_text()
    template.write_text(template.read_text() + "# changed while the run waited\n")
    proc = looprun("resume", run_id, "--approve", cwd=work)
    _refused(proc, "the template changed since run", f"--template {template}")
    assert (work / "src" / "calc.py").read_text() == waiting
    resumed = looprun(
        "resume", run_id, "--approve", "--json", "--template", "loops/mini.yaml", cwd=work
    )
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["outcome"] == "done"


def test_a_run_without_its_seal_is_refused(tmp_path: Path) -> None:
    work, run_id = _paused(tmp_path)
    _git(work, "update-ref", "-d", f"refs/looprun-sealed/{run_id}")
    proc = looprun("resume", run_id, "--approve", cwd=work)
    _refused(proc, "has no sealed invocation", "start the run again")
