"""The state directory lives in a tree the repository shapes: a ``.looprun`` shipped as a
link (or a link inside it) must never make a run write outside the workdir.

Each case commits the planted link into a real repository (as a cloned project would
ship it), runs the real CLI with a scripted model, and checks that the directory the link
points at is untouched and the run was refused with a clear message, not a traceback.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from tests.support.cli import looprun
from tests.support.git_repos import git_repo

TEMPLATE = """\
looprun: 1
name: t
plan: {mode: none}
act: {prompt: go, tools: [read_file, write_file]}
observe:
  d: {parser: git_diff}
exit: [d.ok]
refine:
  - else: {retry: again}
limits: {max_iterations: 1}
"""


def tree_state(root: Path) -> dict[str, str]:
    """Everything under ``root`` (links not followed), with file contents hashed."""
    seen: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            if path.is_symlink():
                seen[str(path)] = "link:" + os.readlink(path)
            elif path.is_file():
                seen[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                seen[str(path)] = "dir"
    return seen


def _scene(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("precious\n")
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "src" / "a.py").write_text("a = 1\n")
    template = tmp_path / "t.yaml"
    template.write_text(TEMPLATE)
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump([{"text": "nothing to do"}]))
    args = [str(template), "--intent", "x", "--workdir", str(work), "--model", f"script:{script}"]
    return work, outside, args


def _plant_and_commit(work: Path, rel: str, target: Path) -> None:
    link = work / rel
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    git_repo(work)
    files = subprocess.run(["git", "ls-files"], cwd=work, capture_output=True, text=True)
    assert rel in files.stdout.splitlines(), files.stdout  # shipped with the repository


PLANTS = {
    "state-dir-is-a-link": (".looprun", ""),
    "lock-is-a-link": (".looprun/lock", "victim.txt"),
    "runs-is-a-link": (".looprun/runs", ""),
}


@pytest.mark.parametrize("plant", list(PLANTS))
def test_a_shipped_link_in_the_state_dir_is_refused(tmp_path: Path, plant: str) -> None:
    work, outside, args = _scene(tmp_path)
    rel, target = PLANTS[plant]
    _plant_and_commit(work, rel, outside / target if target else outside)
    before = tree_state(outside)
    proc = looprun(*args, cwd=tmp_path)
    assert tree_state(outside) == before, "looprun wrote through a link out of the workdir"
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "is a symbolic link" in proc.stderr and rel in proc.stderr, proc.stderr
    # `runs` and `resume` read through nothing either
    listed = looprun("runs", "--workdir", str(work), cwd=tmp_path)
    assert "Traceback" not in listed.stderr and tree_state(outside) == before


def test_a_link_in_a_private_state_repository_is_refused(tmp_path: Path) -> None:
    """A workdir below a repository's top gets a private repository in ``.looprun/git``;
    a link there would make ``git init`` write elsewhere."""
    work, outside, args = _scene(tmp_path)
    (work / ".looprun").mkdir()
    (work / ".looprun" / "git").symlink_to(outside)
    before = tree_state(outside)
    proc = looprun(*args, cwd=tmp_path)
    assert tree_state(outside) == before
    assert proc.returncode == 1 and "is a symbolic link" in proc.stderr, proc.stderr


def test_a_state_dir_owned_by_someone_else_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give the directory to another user")
    work, _, args = _scene(tmp_path)
    git_repo(work)
    (work / ".looprun").mkdir()
    os.chown(work / ".looprun", 65534, 65534)
    proc = looprun(*args, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "belongs to uid 65534" in proc.stderr, proc.stderr
    assert list((work / ".looprun").iterdir()) == []


def test_runs_lists_where_the_runs_are_kept(tmp_path: Path) -> None:
    work, _, args = _scene(tmp_path)
    git_repo(work)
    proc = looprun(*args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    listed = looprun("runs", "--workdir", str(work), cwd=tmp_path)
    assert f"runs under {work.resolve() / '.looprun' / 'runs'}" in listed.stderr
    assert (work / ".looprun").stat().st_mode & 0o077 == 0  # private to the user
