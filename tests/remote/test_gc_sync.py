"""`looprun gc` on the refs sub-loops leave when they run on a cluster: here, and on the
sync remote they went through, where other repositories' runs stay untouched."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.cli import looprun
from tests.support.git_repos import git_repo


def _git(repo: Path | str, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True
    ).stdout


def _refs(repo: Path | str) -> set[str]:
    return set(_git(repo, "for-each-ref", "--format=%(refname)").split())


def _sub_refs(run: str) -> list[str]:
    sub = f"{run}.one-1"
    return [
        f"refs/looprun-sync/{sub}/start",
        f"refs/looprun-sync/{sub}/journal",
        f"refs/looprun-sync/{sub}/lease",
        f"refs/looprun/{sub}/final",
    ]


def test_gc_prunes_the_sync_refs_of_deleted_runs_here_and_on_the_sync_remote(
    tmp_path: Path,
) -> None:
    work = tmp_path / "proj"
    work.mkdir()
    (work / "README").write_text("x\n")
    git_repo(work)
    head = _git(work, "rev-parse", "HEAD").strip()
    remote = tmp_path / "shared.git"
    _git(tmp_path, "init", "-q", "--bare", str(remote))
    gone, alive, foreign = "20260101-000000-aaaaaa", "20260101-000001-bbbbbb", "20260101-9-cc"
    (work / ".looprun" / "runs" / alive).mkdir(parents=True)  # this run's directory stays
    for ref in [*_sub_refs(gone), *_sub_refs(alive)]:
        _git(work, "update-ref", ref, head)
    pushed = [f"{head}:{r}" for r in [*_sub_refs(gone), *_sub_refs(alive), *_sub_refs(foreign)]]
    _git(work, "push", "-q", str(remote), *pushed)

    dry = looprun("gc", "--dry-run", "--sync-remote", str(remote), cwd=work)
    assert dry.returncode == 0, dry.stderr
    assert "would prune 4 ref(s) of 1 deleted run(s)" in dry.stdout, dry.stdout
    assert f"4 ref(s) on {remote}" in dry.stdout
    assert len(_refs(remote)) == 12  # a dry run changes nothing

    proc = looprun("gc", "--sync-remote", str(remote), cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert f"pruned 4 ref(s) of 1 deleted run(s): {gone}" in proc.stdout, proc.stdout
    assert _refs(work) >= set(_sub_refs(alive))
    assert not _refs(work) & set(_sub_refs(gone))
    # on the remote: the deleted run's refs go; the live run's and another repository's stay
    assert _refs(remote) == set(_sub_refs(alive)) | set(_sub_refs(foreign))
