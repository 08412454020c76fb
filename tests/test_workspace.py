"""The workspace on real git repositories: base, checkpoints, rollback, diffs, merges,
and the promise that the user's HEAD, branch, index and stash are never touched."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from looprun.errors import LooprunError, UsageError
from looprun.workspace.git import Git
from looprun.workspace.ignore import current_ignore_rules
from looprun.workspace.tree import Workspace

GIT_ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
    "GIT_AUTHOR_NAME": "Dev",
    "GIT_AUTHOR_EMAIL": "dev@example.com",
    "GIT_COMMITTER_NAME": "Dev",
    "GIT_COMMITTER_EMAIL": "dev@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(cwd: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", *args], cwd=cwd, env=GIT_ENV, capture_output=True, text=True, check=True
    )
    return out.stdout


def tree_state(root: Path) -> dict[str, bytes | str]:
    """Every file under root (not .git/.looprun): content, or link target for symlinks."""
    state: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in (".git", ".looprun")]
        for name in filenames:
            full = Path(dirpath) / name
            rel = full.relative_to(root).as_posix()
            state[rel] = f"-> {os.readlink(full)}" if full.is_symlink() else full.read_bytes()
    return state


def user_state(repo: Path) -> dict[str, str]:
    """What the user owns in git: HEAD, branch, index, stash, branches."""
    return {
        "head": git(repo, "rev-parse", "--verify", "-q", "HEAD").strip() if _has_head(repo) else "",
        "branch": git(repo, "symbolic-ref", "-q", "HEAD"),
        "index": git(repo, "ls-files", "-s"),
        "stash": git(repo, "stash", "list"),
        "heads": git(repo, "for-each-ref", "refs/heads", "refs/stash"),
    }


def _has_head(repo: Path) -> bool:
    code = subprocess.run(
        ["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=repo, env=GIT_ENV, capture_output=True
    ).returncode
    return code == 0


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repo with history, a stash, a staged change, a dirty file, an untracked and an
    ignored file: everything a real checkout looks like mid-work."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "src").mkdir()
    (root / "src" / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "src" / "gone.py").write_text("x = 1\n")
    (root / "README.md").write_text("# demo\n")
    (root / ".gitignore").write_text("*.log\nbuild/\n")
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "run.sh").chmod(0o755)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    (root / "README.md").write_text("# demo\nstashed\n")
    git(root, "stash", "-q")
    (root / "src" / "calc.py").write_text("def add(a, b):\n    return a + b  # staged\n")
    git(root, "add", "src/calc.py")
    (root / "src" / "calc.py").write_text("def add(a, b):\n    return b + a  # dirty\n")
    (root / "notes.txt").write_text("untracked notes\n")
    (root / "src" / "gone.py").unlink()
    (root / "debug.log").write_text("ignored\n")
    return root


def test_restore_base_after_edits_deletes_adds_and_renames(repo: Path) -> None:
    before_user = user_state(repo)
    before = tree_state(repo)
    ws = Workspace.open(repo, state_dir=repo / ".looprun")
    base = ws.base()
    # The model modifies, deletes, renames, adds files and directories, flips a mode.
    (repo / "src" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "README.md").unlink()
    (repo / "notes.txt").rename(repo / "src" / "notes_moved.txt")
    (repo / "pkg" / "deep").mkdir(parents=True)
    (repo / "pkg" / "deep" / "new.py").write_text("print('new')\n")
    (repo / "run.sh").chmod(0o644)
    (repo / "more.log").write_text("ignored, created during the run\n")
    assert set(ws.changed_files()) == {
        "README.md",
        "notes.txt",
        "pkg/deep/new.py",
        "run.sh",
        "src/calc.py",
        "src/notes_moved.txt",
    }
    ws.restore(base)
    after = tree_state(repo)
    assert after == before
    assert not (repo / "more.log").exists(), "an ignored file the run created is removed"
    assert (repo / "debug.log").exists(), "ignored files that were there are left alone"
    assert not (repo / "pkg").exists(), "directories emptied by the rollback are removed"
    assert os.access(repo / "run.sh", os.X_OK)
    assert ws.diff() == ""
    assert user_state(repo) == before_user


def test_checkpoints_live_on_private_refs_only(repo: Path) -> None:
    before_user = user_state(repo)
    ws = Workspace.open(repo, state_dir=repo / ".looprun")
    ws.base()
    (repo / "src" / "calc.py").write_text("def add(a, b):\n    return 42\n")
    first = ws.checkpoint("run1/1")
    (repo / "src" / "calc.py").write_text("def add(a, b):\n    return 43\n")
    (repo / "extra.py").write_text("y = 2\n")
    second = ws.checkpoint("run1/2")
    assert first != second
    assert git(repo, "rev-parse", "refs/looprun/run1/1").strip() == first
    ws.restore("run1/1")
    assert (repo / "src" / "calc.py").read_text().endswith("return 42\n")
    assert not (repo / "extra.py").exists()
    ws.restore(second)
    assert (repo / "extra.py").read_text() == "y = 2\n"
    assert user_state(repo) == before_user
    with pytest.raises(LooprunError, match="no such checkpoint"):
        ws.restore("run1/99")
    with pytest.raises(LooprunError, match="invalid checkpoint"):
        ws.checkpoint("bad..name")


def test_diff_is_against_the_dirty_start_state(repo: Path) -> None:
    ws = Workspace.open(repo, state_dir=repo / ".looprun")
    ws.base()
    assert ws.diff() == ""
    (repo / "notes.txt").write_text("untracked notes\nmore\n")
    diff = ws.diff()
    assert "+more" in diff
    assert "src/calc.py" not in diff, "pre-existing dirty changes are part of the base"
    assert ".looprun" not in diff
    assert ws.changed_files() == ["notes.txt"]


def test_state_dir_is_excluded_once_in_info_exclude(repo: Path) -> None:
    Workspace.open(repo, state_dir=repo / ".looprun")
    Workspace.open(repo, state_dir=repo / ".looprun")
    lines = (repo / ".git" / "info" / "exclude").read_text().splitlines()
    assert lines.count("/.looprun/") == 1
    assert ".looprun" not in git(repo, "status", "--porcelain")


def test_resume_adopts_the_recorded_base(repo: Path) -> None:
    ws = Workspace.open(repo, state_dir=repo / ".looprun")
    base = ws.base()
    (repo / "notes.txt").write_text("edited before the crash\n")
    again = Workspace.open(repo, state_dir=repo / ".looprun", base=base)
    assert again.base() == base
    assert again.changed_files() == ["notes.txt"]


def test_repo_without_commits(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    root.mkdir()
    git(root, "init", "-q")
    (root / "a.py").write_text("a = 1\n")
    ws = Workspace.open(root, state_dir=root / ".looprun")
    base = ws.base()
    (root / "a.py").write_text("a = 2\n")
    (root / "b.py").write_text("b = 1\n")
    ws.checkpoint("r/1")
    assert ws.changed_files() == ["a.py", "b.py"]
    ws.restore(base)
    assert tree_state(root) == {"a.py": b"a = 1\n"}
    assert not _has_head(root), "no commit appears on the user's unborn branch"
    assert git(root, "ls-files") == ""


def test_plain_directory_gets_a_private_repository(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    (root / "lib").mkdir(parents=True)
    (root / "lib" / "m.py").write_text("v = 1\n")
    ws = Workspace.open(root, state_dir=root / ".looprun")
    assert ws.private
    assert not (root / ".git").exists()
    assert (root / ".looprun" / "git" / "HEAD").exists()
    base = ws.base()
    (root / "lib" / "m.py").write_text("v = 2\n")
    (root / "new.txt").write_text("n\n")
    (root / ".looprun" / "runs").mkdir()
    (root / ".looprun" / "runs" / "journal.jsonl").write_text("{}\n")
    assert "-v = 1" in ws.diff() and "+v = 2" in ws.diff()
    assert ws.changed_files() == ["lib/m.py", "new.txt"]
    ws.restore(base)
    assert tree_state(root) == {"lib/m.py": b"v = 1\n"}
    assert (root / ".looprun" / "runs" / "journal.jsonl").exists(), "state is never rolled back"
    with pytest.raises(UsageError):
        ws.commit_to_branch("nope")


def test_subdirectory_of_a_repository_is_its_own_workspace(repo: Path) -> None:
    before_user = user_state(repo)
    sub = repo / "src"
    ws = Workspace.open(sub, state_dir=sub / ".looprun")
    assert ws.private
    base = ws.base()
    (sub / "calc.py").write_text("changed\n")
    assert ws.changed_files() == ["calc.py"]
    ws.restore(base)
    assert (sub / "calc.py").read_text().endswith("# dirty\n")
    assert user_state(repo) == before_user
    assert ".looprun" not in git(repo, "status", "--porcelain")


def test_spaces_unicode_binary_and_symlinks(tmp_path: Path) -> None:
    root = tmp_path / "odd names"
    root.mkdir()
    git(root, "init", "-q")
    (root / "dir with space").mkdir()
    (root / "dir with space" / "fïlé ünï.txt").write_text("héllo\n")
    (root / "data.bin").write_bytes(bytes(range(256)) * 4)
    (root / "link").symlink_to("data.bin")
    ws = Workspace.open(root, state_dir=root / ".looprun")
    before = tree_state(root)
    base = ws.base()
    (root / "dir with space" / "fïlé ünï.txt").write_text("changed\n")
    (root / "data.bin").write_bytes(b"\x00\x01 replaced")
    (root / "link").unlink()
    (root / "link").write_text("now a file\n")
    (root / "名前.py").write_text("x = 1\n")
    assert set(ws.changed_files()) == {"data.bin", "dir with space/fïlé ünï.txt", "link", "名前.py"}
    # binary content is diffed as text too: a NUL byte hides nothing from the policy
    assert "+\x00\x01 replaced" in ws.diff()
    ws.restore(base)
    assert tree_state(root) == before
    assert (root / "link").is_symlink()


def test_commit_to_branch_commits_the_working_tree(repo: Path) -> None:
    git(repo, "config", "user.name", "Repo Owner")
    git(repo, "config", "user.email", "owner@example.com")
    ws = Workspace.open(repo, state_dir=repo / ".looprun")
    ws.base()
    old_head = git(repo, "rev-parse", "HEAD").strip()
    commit = ws.commit_to_branch("fix: add works")
    assert git(repo, "rev-parse", "main").strip() == commit
    assert git(repo, "rev-parse", "HEAD~1").strip() == old_head
    assert git(repo, "log", "-1", "--format=%an <%ae> %s").strip() == (
        "Repo Owner <owner@example.com> fix: add works"
    )
    assert git(repo, "status", "--porcelain") == "", "index and tree match the new commit"
    assert ".looprun" not in git(repo, "show", "--stat", "HEAD")
    assert git(repo, "stash", "list").strip(), "the stash is untouched"


def test_worktree_and_clean_merge(repo: Path, tmp_path: Path) -> None:
    ws = Workspace.open(repo, state_dir=repo / ".looprun")
    ws.base()
    start = ws.checkpoint("outer/1")
    sub = ws.add_worktree(tmp_path / "wt-a", "looprun/outer/task-a", start)
    assert (sub.workdir / "notes.txt").read_text() == "untracked notes\n"
    (sub.workdir / "feature_a.py").write_text("A = 1\n")
    (sub.workdir / "src" / "calc.py").write_text("def add(a, b):\n    return b + a  # sub\n")
    done = sub.checkpoint("task-a/1")
    assert sub.changed_files() == ["feature_a.py", "src/calc.py"]
    # Meanwhile the outer tree changed a different file.
    (repo / "README.md").write_text("# demo, outer edit\n")
    before_user = user_state(repo)
    result = ws.merge_from(done, start)
    assert result.ok and not result.conflicts
    assert set(result.changed) == {"feature_a.py", "src/calc.py"}
    assert (repo / "feature_a.py").read_text() == "A = 1\n"
    assert (repo / "README.md").read_text() == "# demo, outer edit\n"
    assert (repo / "src" / "calc.py").read_text().endswith("# sub\n")
    assert user_state(repo) == before_user
    ws.remove_worktree(sub.workdir)
    assert not (tmp_path / "wt-a").exists()
    ws.delete_branch("looprun/outer/task-a")
    assert "looprun/outer/task-a" not in git(repo, "branch", "--list")


def test_merge_conflict_changes_nothing(repo: Path, tmp_path: Path) -> None:
    ws = Workspace.open(repo, state_dir=repo / ".looprun")
    start = ws.checkpoint("outer/1")
    sub = ws.add_worktree(tmp_path / "wt-b", "looprun/outer/task-b", start)
    (sub.workdir / "notes.txt").write_text("sub-loop version\n")
    (sub.workdir / "other.txt").write_text("clean addition\n")
    theirs = sub.checkpoint("task-b/1")
    (repo / "notes.txt").write_text("outer version\n")
    before = tree_state(repo)
    result = ws.merge_from(theirs, start)
    assert not result.ok
    assert result.conflicts == ("notes.txt",)
    assert tree_state(repo) == before, "nothing is lost or half-applied on conflict"


def test_private_repository_worktrees(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    ws = Workspace.open(root, state_dir=root / ".looprun")
    start = ws.checkpoint("o/1")
    sub = ws.add_worktree(tmp_path / "wt", "looprun/o/t1", start)
    (sub.workdir / "b.txt").write_text("b\n")
    result = ws.merge_from(sub.checkpoint("t1/1"), start)
    assert result.ok and (root / "b.txt").read_text() == "b\n"
    assert sub.changed_files() == ["b.txt"]
    assert not (root / ".git").exists()


def test_missing_workdir_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        Workspace.open(tmp_path / "nope", state_dir=tmp_path / "nope" / ".looprun")


def test_tracked_files_matching_ignore_rules_are_part_of_snapshots(repo: Path) -> None:
    (repo / "keep.log").write_text("tracked despite *.log\n")
    git(repo, "add", "-f", "keep.log")
    git(repo, "commit", "-q", "-m", "force-add a log")
    ws = Workspace.open(repo, state_dir=repo / ".looprun")
    base = ws.base()
    assert ws.snapshot() == ws.git.snapshot(), "the engine and the diff observer agree"
    (repo / "keep.log").write_text("changed by the model\n")
    assert ws.changed_files() == ["keep.log"]
    ws.restore(base)
    assert (repo / "keep.log").read_text() == "tracked despite *.log\n"


def test_one_config_read_answers_every_lookup_and_sees_a_change(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The drivers switched off, the excludes file (``~`` expanded as ``git config
    --path`` does) and the repository format come from one ``git config --list``, read
    again when a config file changes."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    (home / "ignores").write_text("*.secret-draft\n")
    git(repo, "config", "core.excludesFile", "~/ignores")
    git(repo, "config", "filter.Shout.clean", "tr a-z A-Z")
    pinned = Git(repo).pinned()
    assert "*.secret-draft" in current_ignore_rules(pinned, ".looprun")
    assert pinned.config_value("core.excludesfile") == "~/ignores"
    off = ["-c", "filter.Shout.clean=", "-c", "filter.Shout.required=false"]
    assert pinned.no_drivers() == off
    git(repo, "config", "--unset", "filter.Shout.clean")
    git(repo, "config", "core.excludesFile", str(home / "other"))
    assert pinned.no_drivers() == []
    assert pinned.config_value("core.excludesFile") == str(home / "other")


def test_file_changes_read_every_side_in_one_batch_whatever_the_path(tmp_path: Path) -> None:
    """Old and new text of each change: added, deleted, binary, a link, and paths with a
    space, a newline and non-UTF-8 bytes, each matched to its own side."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    odd = os.fsdecode(b"caf\xe9 1.txt")
    for name, text in (("a b.py", "x = 1\n"), ("line\nbreak.py", "y = 1\n"), (odd, "old\n")):
        (root / name).write_text(text)
    (root / "gone.py").write_text("gone = True\n")
    (root / "blob.bin").write_bytes(b"\0\1")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    ws = Workspace.open(root, state_dir=root / ".looprun")
    start = ws.base()
    (root / "a b.py").write_text("x = 2\n")
    (root / "line\nbreak.py").write_text("y = 2\n")
    (root / odd).write_text("new\n")
    (root / "gone.py").unlink()
    (root / "blob.bin").write_bytes(b"\0\2")
    (root / "new 1.py").write_text("fresh = 1\n")
    os.symlink("a b.py", root / "link")
    changes = {c.path: (c.status, c.old, c.new) for c in ws.file_changes(start, contents=True)}
    assert changes == {
        "a b.py": ("M", "x = 1\n", "x = 2\n"),
        "line\nbreak.py": ("M", "y = 1\n", "y = 2\n"),
        odd: ("M", "old\n", "new\n"),
        "gone.py": ("D", "gone = True\n", None),
        "blob.bin": ("M", None, None),
        "new 1.py": ("A", None, "fresh = 1\n"),
        "link": ("A", None, "a b.py"),
    }
    assert {c.path for c in ws.file_changes(start)} == set(changes)


def test_the_same_pair_of_trees_is_diffed_once(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two trees always differ the same way: an iteration's narrow selection, related
    tests and policy ask git about the pair once; a later pair is asked anew."""
    log, shim = tmp_path / "git.log", tmp_path / "bin" / "git"
    shim.parent.mkdir()
    shim.write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{log}"\nexec "{shutil.which("git")}" "$@"\n'
    )
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim.parent}{os.pathsep}{os.environ['PATH']}")
    ws = Workspace.open(repo, state_dir=repo / ".looprun", watched=True)
    base = ws.base()
    (repo / "src" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    ws.touched()
    now = ws.snapshot()

    def diffs() -> list[str]:
        return [c for c in log.read_text().splitlines() if " diff-tree " in f" {c} "]

    first = ws.file_changes(base, now)
    assert [(c.path, c.status) for c in first] == [("src/calc.py", "M")]
    assert ws.file_changes(base, now) == first
    assert ws.file_changes(base, now, contents=True)[0].new == (repo / "src/calc.py").read_text()
    assert len(diffs()) == 1, diffs()
    (repo / "notes.txt").write_text("changed\n")
    ws.touched()
    later = ws.snapshot()
    assert {c.path for c in ws.file_changes(base, later)} == {"src/calc.py", "notes.txt"}
    assert len(diffs()) == 2, diffs()
