"""A sub-loop's run directory as git carries it between executors.

A sub-loop run on a remote worker publishes its run directory after every completed step
as a commit on ``refs/looprun-sync/<sub-run>/journal``; the outer loop keeps its own copy
in ``<run dir>/subloops/<name>``. Both are records the engine wrote (commands never write
either: a worker's run directory sits outside the tree its commands work in). Every
execution continues the same journal, so of two copies the one whose last event has the
higher ``seq`` holds every step of the other: a resume on any executor starts from it.
"""

from __future__ import annotations

import json
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

from looprun.journal.gc import SYNC_PREFIX
from looprun.workspace.git import Git

JOURNAL_FILE = "journal.jsonl"


def journal_ref(run_id: str) -> str:
    return f"{SYNC_PREFIX}{run_id}/journal"


def last_seq(text: str) -> int:
    """The ``seq`` of the last whole event of a ``journal.jsonl`` (0 for none)."""
    for line in reversed(text.splitlines()):
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a line cut short by a kill
        if isinstance(event, dict) and isinstance(event.get("seq"), int):
            return int(event["seq"])
    return 0


def local_seq(run_dir: Path) -> int:
    """How far the run directory's own journal goes (0 when it has none)."""
    try:
        return last_seq((run_dir / JOURNAL_FILE).read_text("utf-8", errors="replace"))
    except OSError:
        return 0


def pushed_seq(git: Git, commit: str) -> int:
    """How far the journal in a published run-directory commit goes."""
    code, out, _ = git.run_status("show", f"{commit}:{JOURNAL_FILE}")
    return last_seq(out) if code == 0 else 0


def pushed_commit(git: Git, run_id: str) -> str:
    """The commit of the sub-loop's last published run directory here, or ""."""
    return git.run("rev-parse", "-q", "--verify", journal_ref(run_id), check=False).strip()


def commit_directory(git: Git, directory: Path, message: str) -> str:
    """A commit of every file under ``directory`` (outside any work tree of ``git``)."""
    with tempfile.TemporaryDirectory(prefix="looprun-sync-") as tmp:
        env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
        git.run("--work-tree", str(directory), "add", "-A", "--force", ".", env=env)
        tree = git.run("write-tree", env=env).strip()
    return git.run("commit-tree", tree, "-m", message).strip()


def extract_commit(git: Git, commit: str, directory: Path) -> None:
    """Write the files of ``commit`` into ``directory`` (a run directory coming back)."""
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="looprun-sync-") as tmp:
        archive = os.path.join(tmp, "run.tar")
        git.run("archive", "--format=tar", "-o", archive, commit)
        with tarfile.open(archive) as tar:
            tar.extractall(directory, filter="data")


def publish_local(git: Git, run_id: str, run_dir: Path) -> None:
    """Point the sub-loop's journal ref at ``run_dir`` as the outer loop holds it: a
    sub-loop that last ran here resumes on a cluster from this record, whatever a
    command of its own may have left on that ref."""
    if local_seq(run_dir):
        sha = commit_directory(git, run_dir, f"looprun journal of {run_id}: handed over")
        git.run("update-ref", journal_ref(run_id), sha)


def adopt_pushed(git: Git, run_id: str, run_dir: Path) -> bool:
    """Replace ``run_dir`` with the sub-loop's published run directory when that one
    went further (a driver killed before it fetched the last steps); True if it did."""
    commit = pushed_commit(git, run_id)
    if not commit or pushed_seq(git, commit) <= local_seq(run_dir):
        return False
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="looprun-adopt-", dir=run_dir.parent) as tmp:
        extract_commit(git, commit, Path(tmp) / "run")
        if run_dir.exists():
            shutil.rmtree(run_dir)
        os.replace(Path(tmp) / "run", run_dir)
    return True
