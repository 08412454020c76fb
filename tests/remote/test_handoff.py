"""A sub-loop's run dir handed between executors through a real git repository: the copy
whose journal goes further wins, and a sub-loop last run here resumes from its run dir
whatever its journal ref says."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.git_repos import git_repo

from looprun.journal.handoff import (
    adopt_pushed,
    commit_directory,
    journal_ref,
    last_seq,
    local_seq,
    publish_local,
    pushed_commit,
    pushed_seq,
)
from looprun.workspace.git import Git

RUN = "20260101-000000-abcdef.task-1"


def _run_dir(path: Path, seqs: range, state: dict) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"seq": s, "event": "iteration"}) for s in seqs]
    (path / "journal.jsonl").write_text("\n".join(lines) + "\n")
    (path / "state.json").write_text(json.dumps(state))
    return path


def _git(tmp: Path) -> Git:
    work = tmp / "proj"
    work.mkdir()
    (work / "README.md").write_text("x\n")
    return Git(git_repo(work))


def _push(git: Git, directory: Path) -> str:
    sha = commit_directory(git, directory, "pushed")
    git.run("update-ref", journal_ref(RUN), sha)
    return sha


def test_last_seq_skips_a_line_cut_by_a_kill() -> None:
    text = '{"seq": 1}\n{"seq": 2, "event": "x"}\n{"seq": 3, "ev'
    assert last_seq(text) == 2
    assert last_seq("") == 0


def test_the_published_run_dir_is_adopted_only_when_it_went_further(tmp_path: Path) -> None:
    git = _git(tmp_path)
    local = _run_dir(tmp_path / "runs" / "task-1", range(1, 6), {"iterations": 1})
    ahead = _run_dir(tmp_path / "worker", range(1, 10), {"iterations": 2})
    sha = _push(git, ahead)
    assert pushed_commit(git, RUN) == sha and pushed_seq(git, sha) == 9
    assert adopt_pushed(git, RUN, local)
    assert json.loads((local / "state.json").read_text()) == {"iterations": 2}
    assert local_seq(local) == 9
    # behind (or level with) the run dir: the run dir stays as it is
    _push(git, _run_dir(tmp_path / "old", range(1, 4), {"iterations": 0}))
    assert not adopt_pushed(git, RUN, local)
    assert json.loads((local / "state.json").read_text()) == {"iterations": 2}


def test_a_run_dir_that_never_existed_here_is_taken_whole(tmp_path: Path) -> None:
    git = _git(tmp_path)
    _push(git, _run_dir(tmp_path / "worker", range(1, 3), {"iterations": 1}))
    target = tmp_path / "runs" / "subloops" / "task-1"
    assert adopt_pushed(git, RUN, target)
    assert local_seq(target) == 2


def test_publish_local_overrides_a_forged_journal_ref(tmp_path: Path) -> None:
    git = _git(tmp_path)
    local = _run_dir(tmp_path / "runs" / "task-1", range(1, 6), {"iterations": 1})
    _push(git, _run_dir(tmp_path / "forged", range(999990, 999999), {"iterations": 9}))
    publish_local(git, RUN, local)
    sha = pushed_commit(git, RUN)
    assert pushed_seq(git, sha) == 5
    assert json.loads(git.run("show", f"{sha}:state.json")) == {"iterations": 1}
