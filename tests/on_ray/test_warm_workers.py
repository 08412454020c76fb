"""Warm workers on a real local Ray cluster: a later run finds the worker an earlier run
started, still holding looprun and its clone, and gets a clean tree of its own commit."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from ray_helpers import busy_workers, one_task_project
from tests.support.cli import looprun, scripted_run

_WORKER = re.compile(r"\[one\] worker \w+ on \S+ pid (\d+)")


def _run(work: Path, script: Path, address: str) -> tuple[dict, int]:
    proc = looprun(
        *scripted_run(str(work / "one.yaml"), intent="abc", workdir=work, script=script),
        "--executor",
        f"ray:{address}",
        "--json",
        cwd=work,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    found = _WORKER.search(proc.stderr)
    assert found, proc.stderr
    return json.loads(proc.stdout), int(found.group(1))


def test_a_later_run_reuses_the_warm_worker_with_a_clean_tree(
    tmp_path: Path, ray_address: str
) -> None:
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    first, script = one_task_project(tmp_path / "first")
    summary, pid = _run(first, script, ray_address)
    assert summary["outcome"] == "done"

    # another project on the same cluster: the worker is the same process, the tree its own
    second, script = one_task_project(tmp_path / "second")
    (second / "own.md").write_text("only here\n")
    subprocess.run(["git", "add", "-A"], cwd=second, check=True)
    subprocess.run(["git", "commit", "-qm", "own"], cwd=second, check=True)
    summary, again = _run(second, script, ray_address)
    assert summary["outcome"] == "done"
    assert again == pid  # warm: no new worker process, looprun imported once
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=second,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    files = sorted(p for p in listed if not p.startswith(".looprun"))
    assert files == ["a.txt", "b.txt", "c.txt", "one.yaml", "own.md", "steps.yaml"]
    assert not busy_workers()
