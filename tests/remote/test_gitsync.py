"""The fence of remote sub-loops, on real git: grants, claims and publishes are
compare-and-swap on the shared remote, so a superseded execution can publish nothing."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest
from remote_helpers import bare_remote, project

from looprun.remote.gitsync import LeaseLost, Remote, commit_directory, extract_commit, sync_ref
from looprun.workspace.git import Git


def _clone(tmp: Path, url: str, name: str) -> Remote:
    where = tmp / name
    subprocess.run(["git", "init", "-q", str(where)], check=True)
    return Remote(Git(where), url)


def test_one_of_two_claims_of_the_same_grant_wins(tmp_path: Path) -> None:
    url = bare_remote(tmp_path, project(tmp_path))
    driver = Remote(Git(tmp_path / "proj"), url)
    driver.grant("r1", "tok")
    workers = [_clone(tmp_path, url, f"w{i}") for i in range(2)]
    outcomes: list[str] = []
    barrier = threading.Barrier(2)

    def claim(i: int) -> None:
        barrier.wait()
        try:
            workers[i].claim("r1", "tok", f"exec{i}")
            outcomes.append(f"won:{i}")
        except LeaseLost:
            outcomes.append(f"lost:{i}")

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(o.split(":")[0] for o in outcomes) == ["lost", "won"]
    winner = next(o for o in outcomes if o.startswith("won")).split(":")[1]
    lease = driver.lease("r1")
    assert lease is not None and lease.execution == f"exec{winner}"


def test_a_new_grant_fences_out_the_running_execution(tmp_path: Path) -> None:
    work = project(tmp_path)
    url = bare_remote(tmp_path, work)
    driver = Remote(Git(work), url)
    driver.grant("r1", "old")
    worker = _clone(tmp_path, url, "w")
    held = worker.claim("r1", "old", "e1")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "journal.jsonl").write_text('{"seq": 1}\n')
    journal = commit_directory(worker.git, tmp_path / "run", "journal")
    held = worker.publish("r1", held, [f"+{journal}:{sync_ref('r1', 'journal')}"], "step")
    assert driver.ls(sync_ref("r1", "journal")) == {sync_ref("r1", "journal"): journal}

    driver.grant("r1", "new")  # the outer loop gave the sub-loop to another execution
    (tmp_path / "run" / "journal.jsonl").write_text('{"seq": 1}\n{"seq": 2}\n')
    later = commit_directory(worker.git, tmp_path / "run", "journal")
    with pytest.raises(LeaseLost):
        worker.publish("r1", held, [f"+{later}:{sync_ref('r1', 'journal')}"], "step")
    # nothing of the refused push reached the remote: the push was atomic
    assert driver.ls(sync_ref("r1", "journal")) == {sync_ref("r1", "journal"): journal}
    with pytest.raises(LeaseLost):  # and the old token can never claim again
        _clone(tmp_path, url, "w2").claim("r1", "old", "e2")


def test_a_run_directory_goes_through_git_and_back(tmp_path: Path) -> None:
    work = project(tmp_path)
    run = tmp_path / "run"
    (run / "observe").mkdir(parents=True)
    (run / "state.json").write_text("{}")
    (run / "observe" / "1.json").write_text('{"ok": true}')
    git = Git(work)
    commit = commit_directory(git, run, "journal")
    back = tmp_path / "back"
    extract_commit(git, commit, back)
    assert (back / "observe" / "1.json").read_text() == '{"ok": true}'
    assert (back / "state.json").read_text() == "{}"
    # the project's own index and status are untouched
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=work, capture_output=True, text=True, check=True
    )
    assert status.stdout == ""
