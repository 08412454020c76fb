"""A remote worker holds the sub-template it loads from its clone to the files the run
recorded: a fragment rewritten in the outer tree before the start commit was taken (by
a command of an earlier sub-loop, say) is refused, not run. Real git, a real scripted
sub-loop, no cluster."""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import replace
from pathlib import Path

from remote_helpers import STEPS, bare_remote, make_job, project, step_turns, write_script

from looprun.remote.worker import run_remote_job

OBSERVE = 'observe:\n  third: {run: "test -f c.txt", parser: exit_code}\n'
FRAGMENT = "observe:\n" + OBSERVE.split("\n", 1)[1]
PLANTED = FRAGMENT + '  planted: {run: "touch planted", parser: exit_code}\n'


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _project(tmp: Path, fragment: str) -> tuple[Path, dict[str, str]]:
    """The steps sub-template with its observer in an included fragment, committed with
    ``fragment``; and what the run recorded when it composed it (the honest fragment)."""
    work = project(tmp)
    steps = STEPS.replace(OBSERVE, "").replace("plan:", "include: [frag.yaml]\nplan:")
    (work / "steps.yaml").write_text(steps)
    (work / "frag.yaml").write_text(fragment)
    subprocess.run(["git", "add", "-A"], cwd=work, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "frag"],
        cwd=work,
        check=True,
    )
    return work, {"frag.yaml": _digest(FRAGMENT), "steps.yaml": _digest(steps)}


def test_a_fragment_unlike_the_record_is_refused_on_the_worker(tmp_path: Path) -> None:
    work, recorded = _project(tmp_path, PLANTED)
    url = bare_remote(tmp_path, work)
    script = write_script(tmp_path / "script.yaml", step_turns())
    job = replace(make_job(work, url, script), template_files=recorded)
    result = run_remote_job(job.to_json(), lambda line: None)
    assert result["outcome"] == "error", result
    assert result["reason"].startswith("frag.yaml: the sub-loop"), result["reason"]
    assert result["iterations"] == 0


def test_the_recorded_fragment_runs_on_the_worker(tmp_path: Path) -> None:
    work, recorded = _project(tmp_path, FRAGMENT)
    url = bare_remote(tmp_path, work)
    script = write_script(tmp_path / "script.yaml", step_turns())
    job = replace(make_job(work, url, script), template_files=recorded)
    result = run_remote_job(job.to_json(), lambda line: None)
    assert result["outcome"] == "done", result
