"""A long-lived worker's clone of a remote is an object store only: what one job's
commands plant in it (hooks, config, refs, files, alternates) reaches no later job."""

from __future__ import annotations

import subprocess
from pathlib import Path

from remote_helpers import bare_remote, make_job, project, step_turns, write_script

from looprun.remote.clones import CloneCache
from looprun.remote.worker import run_remote_job


def _git(cwd: Path | str, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout


def _plant(cache: Path, marker: Path) -> None:
    """What a hostile command of a job could leave in the clone it can reach."""
    hook = f"#!/bin/sh\necho ran >> {marker}\n"
    evil = cache.parent / "evil-hooks"
    evil.mkdir()
    for folder in (cache / "hooks", evil):
        folder.mkdir(exist_ok=True)
        for name in ("reference-transaction", "post-checkout", "pre-push", "post-update"):
            (folder / name).write_text(hook)
            (folder / name).chmod(0o755)
    monitor = cache.parent / "fsmonitor.sh"
    monitor.write_text(hook)
    monitor.chmod(0o755)
    with (cache / "config").open("a") as config:
        config.write(f"[core]\n\thooksPath = {evil}\n\tfsmonitor = {monitor}\n")
        config.write(f"[core]\n\tsshCommand = {monitor}\n[credential]\n\thelper = !{monitor}\n")
    (cache / "planted.txt").write_text("planted\n")
    (cache / "info").mkdir(exist_ok=True)
    (cache / "info" / "exclude").write_text("*.txt\n")
    (cache / "objects" / "info").mkdir(parents=True, exist_ok=True)
    (cache / "objects" / "info" / "alternates").write_text(f"{cache.parent / 'nowhere'}\n")
    (cache / "refs" / "heads").mkdir(parents=True, exist_ok=True)
    (cache / "refs" / "heads" / "evil").write_text("1" * 40 + "\n")


def test_what_a_job_plants_in_the_cached_clone_never_reaches_the_next_job(
    tmp_path: Path,
) -> None:
    work = project(tmp_path)
    url = bare_remote(tmp_path, work)
    script = write_script(tmp_path / "script.yaml", step_turns())
    clones = CloneCache(tmp_path / "warm" / "clones")
    earlier = make_job(work, url, script)
    first = run_remote_job(earlier.to_json(), lambda _: None, clones=clones)
    assert first["outcome"] == "done", first
    cache = clones.path(url)
    assert _git(cache, "cat-file", "-t", earlier.commit) == "commit\n"  # fetched, kept
    marker = tmp_path / "marker"
    _plant(cache, marker)

    # the next job starts from a newer commit: the cache must fetch (hooks would fire now)
    (work / "later.md").write_text("later\n")
    _git(work, "add", "-A")
    _git(work, "commit", "-qm", "later")
    job = make_job(work, url, script)
    second = run_remote_job(job.to_json(), lambda _: None, clones=clones)
    assert second["outcome"] == "done", second
    assert not marker.exists(), marker.read_text()
    files = set(_git(url, "ls-tree", "-r", "--name-only", second["commit"]).split())
    assert files == {"README.md", "steps.yaml", "later.md", "a.txt", "b.txt", "c.txt"}
    # what was planted is gone; the clone holds this job's start and nothing runs from it
    assert not (cache / "planted.txt").exists() and not (cache / "hooks").exists()
    assert "hooksPath" not in (cache / "config").read_text()
    assert not (cache / "objects" / "info" / "alternates").exists()
    start = f"refs/looprun-sync/{job.run_id}/start"
    assert _git(cache, "rev-parse", start).strip() == job.commit


def test_a_cached_clone_git_cannot_read_is_started_again(tmp_path: Path) -> None:
    work = project(tmp_path)
    url = bare_remote(tmp_path, work)
    script = write_script(tmp_path / "script.yaml", step_turns())
    clones = CloneCache(tmp_path / "clones")
    cache = clones.path(url)
    cache.mkdir(parents=True)
    (cache / "objects").write_text("not a directory\n")  # a clone broken between jobs
    (cache / "refs").mkdir()
    (cache / "refs" / "bad").write_text("garbage\n")
    result = run_remote_job(make_job(work, url, script).to_json(), lambda _: None, clones=clones)
    assert result["outcome"] == "done", result
    assert (cache / "objects").is_dir()
