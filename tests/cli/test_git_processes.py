"""A plain run's git processes: each one the engine starts is counted (a ``git`` on the
PATH that writes down its arguments, then runs the real one), on a real one-iteration run
of the CLI in a real repository. A check that changed nothing leaves the tree the model's
write made in-process, whose objects are hashed again without asking git to list them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.git_repos import git_repo

# at most this many per one-iteration run (a budget: more means a new call on every run)
BUDGET = 20


def _counting_git(root: Path) -> tuple[Path, Path]:
    real = shutil.which("git")
    assert real is not None
    log = root / "git.log"
    bin_dir = root / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "git"
    shim.write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{log}"\nexec "{real}" "$@"\n', encoding="utf-8"
    )
    shim.chmod(0o755)
    return bin_dir, log


def test_a_plain_run_starts_no_more_git_than_it_needs(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "app.py").write_text("x = 1\n", encoding="utf-8")
    git_repo(repo)
    script = tmp_path / "script.json"
    turn = {"name": "write_file", "arguments": {"path": "notes.txt", "content": "hi\n"}}
    script.write_text(json.dumps([{"tool_calls": [turn]}, {"text": "ok"}]), encoding="utf-8")
    bin_dir, log = _counting_git(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    env["LOOPRUN_CACHE_DIR"] = str(tmp_path / "cache")
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "looprun", "--until", "true", "--intent", "a note"),
            *("--workdir", str(repo), "--model", f"script:{script}", "--json"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["outcome"] == "done"
    assert (repo / "notes.txt").read_text(encoding="utf-8") == "hi\n"
    calls = log.read_text(encoding="utf-8").splitlines()
    diff_trees = [c for c in calls if " diff-tree " in f" {c} "]
    # the patch is asked of git once; the written objects are not listed by git again
    assert len(diff_trees) == 1 and "--patch-with-raw" in diff_trees[0], diff_trees
    assert len(calls) <= BUDGET, "\n".join(calls)
