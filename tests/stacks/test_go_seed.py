"""The seeded build cache on a real Go module: the seed a run saves holds everything its
baseline built, `go vet`'s analysis of the standard library included, so the next run's
baseline vets only the module's own packages instead of the whole import graph."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.stacks.go_support import require_go
from tests.support.git_repos import git_repo

from looprun.checks.clean_tree import trees_home
from looprun.checks.seeded_cache import seed_home

pytestmark = pytest.mark.e2e

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "go_textkit"
NOTE = """\
- tool_calls:
    - name: write_file
      arguments: {path: NOTES.md, content: "notes\\n"}
- text: "Wrote a note."
"""
# a run of go's vet tool in `go vet -x` output (one per package it analyses)
VET_RUN = re.compile(r"/pkg/tool/[^/\s]+/vet\s")


def _module(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The sample module in a fresh repository, and an environment with a cache of its own."""
    work = tmp_path / "textkit"
    shutil.copytree(SAMPLE / "strutil", work / "strutil")
    shutil.copytree(SAMPLE / "cmd", work / "cmd")
    shutil.copy(SAMPLE / "go.mod", work / "go.mod")
    git_repo(work)
    (tmp_path / "script.yaml").write_text(NOTE)
    env = {**os.environ, "LOOPRUN_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("GOCACHE", None)
    return work, env


def _note_run(work: Path, env: dict[str, str]) -> None:
    """One iteration of `bugfix` whose model writes a note (no Go)."""
    argv = [sys.executable, "-m", "looprun", "bugfix", "--intent", "a note", "--json"]
    argv += ["--model", f"script:{work.parent / 'script.yaml'}", "--max-iterations", "1"]
    done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 3), done.stderr  # one iteration: done or exhausted


def test_the_seed_holds_the_baselines_vet_analysis(tmp_path: Path) -> None:
    go = require_go()
    work, env = _module(tmp_path)
    _note_run(work, env)

    seed = seed_home(work, env) / "go" / "GOCACHE"
    assert seed.is_dir()
    # the model's turn wrote no Go: nothing of a check after it, only the baseline's build
    cache = tmp_path / "gocache"
    shutil.copytree(seed, cache)
    vet = subprocess.run(
        [go, "vet", "-x", "./..."],
        cwd=work,
        env={**env, "GOCACHE": str(cache), "GOPROXY": "off", "GOFLAGS": ""},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert vet.returncode == 0, vet.stderr
    # the module's packages (their directory is part of the key, so they are vetted
    # again here), never the standard library's dozens: a seed of the tests' build alone
    # leaves vet to analyse every package the module imports
    runs = len(VET_RUN.findall(vet.stderr))
    assert 0 < runs <= 4, vet.stderr[-2000:]


def test_later_runs_find_their_builds_where_the_first_left_them(tmp_path: Path) -> None:
    """A stack's check tree is at the same place in every run of a working tree, so the
    module's own packages, keyed by their directory in go's cache, are the seed's builds
    in the next run too: once a run has saved the seed, an unchanged module's runs find
    everything built (`go vet`'s facts of its dependencies included) and save nothing."""
    require_go()
    work, env = _module(tmp_path)
    seed = seed_home(work, env) / "go" / "GOCACHE"
    inodes = []
    for _ in range(3):
        _note_run(work, env)
        inodes.append(seed.stat().st_ino)
    assert inodes[1] == inodes[2], "the third run saved a new seed: it built something again"
    kept = trees_home(work, env) / "go"
    assert (kept / "strutil").is_dir() and (kept / "go.mod").read_text() == (
        work / "go.mod"
    ).read_text()
