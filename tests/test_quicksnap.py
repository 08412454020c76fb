"""Snapshots after the file tools wrote known paths are made in-process
(``looprun.workspace.snapshots``); each must be the very tree git's full snapshot makes of the same
working tree, whatever the ignore rules, attributes, modes and shapes involved."""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

import pytest

from looprun.journal import sealed
from looprun.workspace.objects import TreeModel, commit_body, object_id, write_object
from looprun.workspace.snapshots import QuickSnapshots
from looprun.workspace.tree import Workspace

ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Dev",
    "GIT_AUTHOR_EMAIL": "dev@example.com",
    "GIT_COMMITTER_NAME": "Dev",
    "GIT_COMMITTER_EMAIL": "dev@example.com",
}


def git(cwd: Path, *args: str, input: bytes | None = None) -> str:
    out = subprocess.run(
        ["git", *args], cwd=cwd, env=ENV, input=input, capture_output=True, check=True
    )
    return out.stdout.decode()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / ".gitignore").write_text("*.log\n!keep.log\nbuild/\n/top-only.txt\n")
    (root / "src").mkdir()
    (root / "src" / ".gitignore").write_text("gen_*\n")
    (root / "src" / "a.py").write_text("a = 1\n")
    (root / "README.md").write_text("hello\n")
    (root / "tool.sh").write_text("#!/bin/sh\n")
    (root / "tool.sh").chmod(0o755)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")
    return root


def full_tree(repo: Path, base: str) -> str:
    """What git's full snapshot makes of the tree now (an unwatched workspace)."""
    return Workspace.open(repo, state_dir=repo / ".looprun", base=base).snapshot()


def write(repo: Path, ws: Workspace, rel: str, data: bytes = b"x\n") -> None:
    path = repo / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    ws.touched([rel])


def opened(repo: Path) -> tuple[Workspace, str]:
    ws = Workspace.open(repo, state_dir=repo / ".looprun", watched=True)
    base = ws.base()
    ws.checkpoint("run/0")
    return ws, base


STEPS = {
    "new file in new directories": ["deep/er/new.txt"],
    "tracked file changed": ["src/a.py"],
    "ignored by a top rule": ["debug.log"],
    "re-included by a negation": ["keep.log"],
    "inside an ignored directory": ["build/out.txt"],
    "ignored by a nested .gitignore": ["src/gen_x.py"],
    "anchored rule, other depth": ["src/top-only.txt"],
    "anchored rule, top": ["top-only.txt"],
    "a .gitignore written now counts for nothing": ["late.txt", ".gitignore"],
    "tool cache": ["src/__pycache__/a.pyc"],
    "state directory": [".looprun/x.txt"],
}


@pytest.mark.parametrize("paths", list(STEPS.values()), ids=list(STEPS))
def test_a_written_path_gives_the_tree_git_gives(repo: Path, paths: list[str]) -> None:
    ws, base = opened(repo)
    for rel in paths:
        data = b"late.txt\n" if rel == ".gitignore" else f"{rel}\n".encode()
        write(repo, ws, rel, data)
    assert ws.snapshot() == full_tree(repo, base)


def test_modes_deletions_and_shapes_give_the_tree_git_gives(repo: Path) -> None:
    ws, base = opened(repo)
    (repo / "tool.sh").chmod(0o644)
    write(repo, ws, "tool.sh", b"#!/bin/sh\necho\n")
    assert ws.snapshot() == full_tree(repo, base)
    write(repo, ws, "run.sh", b"#!/bin/sh\n")
    (repo / "run.sh").chmod(0o755)
    ws.touched(["run.sh"])
    assert ws.snapshot() == full_tree(repo, base)
    (repo / "README.md").unlink()
    ws.touched(["README.md"])
    assert ws.snapshot() == full_tree(repo, base)
    (repo / "src" / "a.py").unlink()  # src/ keeps only its .gitignore
    (repo / "src" / ".gitignore").unlink()
    ws.touched(["src/a.py", "src/.gitignore"])
    assert ws.snapshot() == full_tree(repo, base)
    (repo / "src").rmdir()
    write(repo, ws, "src", b"now a file\n")  # a directory gone, a file in its place
    assert ws.snapshot() == full_tree(repo, base)
    (repo / "src").unlink()
    write(repo, ws, "src/b.py", b"b\n")  # and back
    assert ws.snapshot() == full_tree(repo, base)


def test_attributes_nested_repositories_links_and_reports(repo: Path) -> None:
    ws, base = opened(repo)
    (repo / "docs").mkdir()
    (repo / "docs" / ".gitattributes").write_text("* text eol=lf\n")
    write(repo, ws, "docs/.gitattributes", b"* text eol=lf\n")
    write(repo, ws, "docs/crlf.txt", b"one\r\ntwo\r\n")  # converted on the way in
    assert ws.snapshot() == full_tree(repo, base)
    git(repo / "docs", "init", "-q", "inner")
    write(repo, ws, "docs/inner/x.txt")
    git(repo / "docs" / "inner", "add", "x.txt")
    git(repo / "docs" / "inner", "commit", "-qm", "inner")
    assert ws.snapshot() == full_tree(repo, base)
    os.symlink("README.md", repo / "link")
    ws.touched(["link"])
    assert ws.snapshot() == full_tree(repo, base)
    ws.exclude(["report.xml"])
    write(repo, ws, "report.xml")
    tree = ws.snapshot()
    assert tree == full_tree(repo, base) or "report.xml" not in git(repo, "ls-tree", tree)
    assert "report.xml" not in git(repo, "ls-tree", "-r", "--name-only", tree)


def test_a_random_sequence_of_writes_matches_git_after_every_step(repo: Path) -> None:
    rnd = random.Random(11)
    ws, base = opened(repo)
    names = ["a.txt", "d/b.txt", "d/e/c.log", "keep.log", "build/z", "src/gen_q", "src/q.py"]
    for step in range(40):
        rel = rnd.choice(names)
        path = repo / rel
        if path.exists() and rnd.random() < 0.3:
            path.unlink()
            ws.touched([rel])
        else:
            write(repo, ws, rel, f"{step}\n".encode())
            if rnd.random() < 0.2:
                path.chmod(0o755)
        if rnd.random() < 0.5:
            assert ws.snapshot() == full_tree(repo, base), step
            ws.checkpoint(f"run/{step + 1}")
    assert ws.snapshot() == full_tree(repo, base)


def test_a_directory_kept_sorted_between_writes_matches_git(repo: Path) -> None:
    """A directory's tree is kept sorted from one write to the next and only the changed
    names put in again; names that sort differently as files and as directories
    (``a``, ``a-b``, ``a.b``, ``a/``), directories that come and go, and removals keep
    it the tree git writes."""
    rnd = random.Random(5)
    ws, base = opened(repo)
    names = [f"n/{n}" for n in ("a", "a-b", "a.b", "a0", "b", "é", "z", "A")]
    names += ["n/a/x", "n/a-b/y", "n/sub/deep/z", "n/sub/w", *(f"n/many{i:03d}" for i in range(60))]
    for step in range(80):
        rel = rnd.choice(names)
        path = repo / rel
        if path.is_file() and rnd.random() < 0.3:
            path.unlink()
            ws.touched([rel])
        elif any(p.is_file() for p in path.parents if p != repo) or path.is_dir():
            continue  # a file where a directory must be, or the reverse: left to git
        else:
            write(repo, ws, rel, f"{step}\n".encode())
        if rnd.random() < 0.6:
            assert ws.snapshot() == full_tree(repo, base), step
    assert ws.snapshot() == full_tree(repo, base)


def test_objects_and_commits_are_those_git_writes(repo: Path) -> None:
    objects = repo / ".git" / "objects"
    data = b"some bytes\n\0and more"
    oid = write_object(objects, "blob", data)
    assert oid == git(repo, "hash-object", "--stdin", input=data).strip() == object_id("blob", data)
    assert git(repo, "cat-file", "blob", oid).encode() == data
    head = git(repo, "rev-parse", "HEAD").strip()
    tree = git(repo, "rev-parse", "HEAD^{tree}").strip()
    model = TreeModel(tree, git(repo, "ls-tree", "-r", "-t", "-z", "--full-tree", tree).encode())
    assert model.write(objects) == tree  # nothing changed: the same tree
    body = commit_body(tree, [head], "looprun", "looprun@localhost", "looprun checkpoint 1", 1.7e9)
    ours = write_object(objects, "commit", body)
    stamp = body.decode().split("\n")[2].split("> ", 1)[1]
    theirs = subprocess.run(
        ["git", "commit-tree", tree, "-p", head, "-m", "looprun checkpoint 1"],
        cwd=repo,
        env={
            **ENV,
            **{f"GIT_{w}_NAME": "looprun" for w in ("AUTHOR", "COMMITTER")},
            **{f"GIT_{w}_EMAIL": "looprun@localhost" for w in ("AUTHOR", "COMMITTER")},
            **{f"GIT_{w}_DATE": stamp for w in ("AUTHOR", "COMMITTER")},
        },
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert ours == theirs
    git(repo, "fsck", "--strict", "--no-dangling")


def test_a_sha256_repository_is_left_to_git(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    git(root, "init", "-q", "--object-format=sha256")
    (root / "f.txt").write_text("f\n")
    ws = Workspace.open(root, state_dir=root / ".looprun", watched=True)
    base = ws.base()
    assert QuickSnapshots(ws.git).repo() is None
    write(root, ws, "g.txt")
    assert ws.snapshot() == full_tree(root, base)


def test_the_diff_kept_per_path_is_the_diff_git_gives(repo: Path) -> None:
    """Through edits of the same file, reverts, deletions, mode and type changes and
    odd names, the watched workspace's diff equals a fresh ``git diff`` every time."""
    rnd = random.Random(7)
    ws, base = opened(repo)
    names = ["README.md", "src/a.py", "n/new.txt", "n/two words.txt", "é.txt", 'q"uote.txt']
    for step in range(40):
        rel = rnd.choice(names)
        path = repo / rel
        roll = rnd.random()
        if roll < 0.15 and path.exists():
            path.unlink()
            ws.touched([rel])
        elif roll < 0.25 and rel == "README.md":
            path.write_text("hello\n")  # back to its base content
            ws.touched([rel])
        elif roll < 0.3:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.unlink(missing_ok=True)
            os.symlink("elsewhere", path)  # a change of type
            ws.touched(None)
        else:
            if path.is_symlink():
                path.unlink()
            write(repo, ws, rel, f"line {step}\n{rel}\n".encode())
            if roll > 0.9:
                path.chmod(0o755)
        fresh = Workspace.open(repo, state_dir=repo / ".looprun", base=base)
        assert ws.diff() == fresh.diff(), step
        assert "".join(ws.diff_parts()) == ws.diff(), step
        assert ws.changed_files() == fresh.changed_files(), step


def test_checkpoint_refs_written_in_process_are_what_git_reads(repo: Path) -> None:
    ws, _ = opened(repo)
    write(repo, ws, "n.txt")
    commit = ws.checkpoint("run/1")
    assert git(repo, "rev-parse", "refs/looprun/run/1").strip() == commit
    refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/looprun/").split()
    assert refs[-1] == "refs/looprun/run/1" and refs[0].startswith("refs/looprun/base/")
    git(repo, "fsck", "--strict", "--no-dangling")
    # once looprun refs are packed, or where git logs every ref, git writes them
    git(repo, "pack-refs", "--all")
    packed = Workspace.open(repo, state_dir=repo / ".looprun", watched=True)
    assert QuickSnapshots(packed.git).set_ref("refs/looprun/run/2", commit) is False
    git(repo, "config", "core.logAllRefUpdates", "always")
    (repo / ".git" / "packed-refs").unlink()
    logged = Workspace.open(repo, state_dir=repo / ".looprun", watched=True)
    assert QuickSnapshots(logged.git).set_ref("refs/looprun/run/3", commit) is False
    logged.checkpoint("run/4")
    assert git(repo, "reflog", "show", "refs/looprun/run/4").strip()


def test_a_sealed_invocation_is_written_in_process_as_git_reads_it(repo: Path) -> None:
    ws = Workspace.open(repo, state_dir=repo / ".looprun")
    assert ws.quick.set_blob_ref(sealed.ref("run-1"), b'{"intent": "first"}')  # no git
    sealed.seal(ws.git, "run-1", '{"intent": "again"}', ws.quick)  # sealed again: replaced
    assert git(repo, "cat-file", "blob", sealed.ref("run-1")) == '{"intent": "again"}'
    assert sealed.unseal(ws.git, "run-1") == {"intent": "again"}
    git(repo, "fsck", "--no-dangling")  # the blob and the ref are git's own


def test_a_packed_sealed_ref_is_left_to_git(repo: Path) -> None:
    ws = Workspace.open(repo, state_dir=repo / ".looprun")
    sealed.seal(ws.git, "run-1", '{"intent": "first"}', ws.quick)
    git(repo, "pack-refs", "--all")
    assert not ws.quick.set_blob_ref(sealed.ref("run-1"), b"{}")
    sealed.seal(ws.git, "run-1", '{"intent": "again"}', ws.quick)
    assert sealed.unseal(ws.git, "run-1") == {"intent": "again"}
