"""The tree a stack's check runs on holds what the diff says and nothing else: real git
repositories, real files, the real sync between checks."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from tests.support.git_repos import git, git_repo

from looprun.checks.clean_tree import CheckTrees, TreeError, trees_home
from looprun.checks.seeded_cache import SOURCE_DATE
from looprun.system.proc import run_process


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "code.py").write_text("VALUE = 1\n")
    (repo / "pyproject.toml").write_text("[tool.pytest.ini_options]\naddopts = '-q'\n")
    (repo / ".gitignore").write_text("secret.py\n__pycache__/\n")
    return git_repo(repo)


def _files(root: Path) -> dict[str, str]:
    out = {}
    for here, _dirs, files in os.walk(root):
        for name in files:
            path = Path(here) / name
            out[str(path.relative_to(root))] = path.read_text()
    return out


def _prepare(trees: CheckTrees, repo: Path, base: str) -> Path:
    root, _env, tampered = trees.prepare("python", workdir=repo, git_dir=None, base=base)
    assert tampered == ""
    return root


def test_the_tree_holds_the_diff_and_the_base_configuration_only(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    base = git("rev-parse", "HEAD^{tree}", cwd=repo)
    trees = CheckTrees(tmp_path / "checks")
    (repo / "pkg" / "code.py").write_text("VALUE = 2\n")  # a change: in the diff
    (repo / "pkg" / "new.py").write_text("NEW = 1\n")  # untracked, not ignored: in it
    (repo / "secret.py").write_text("PLANTED = 1\n")  # ignored at the base: not in it
    (repo / "pkg" / "__pycache__").mkdir()
    (repo / "pkg" / "__pycache__" / "code.cpython-311.pyc").write_text("bytecode")
    (repo / "pyproject.toml").write_text("[tool.pytest.ini_options]\naddopts = '-p evil'\n")
    root = _prepare(trees, repo, base)
    files = _files(root)
    assert files["pkg/code.py"] == "VALUE = 2\n"
    assert files["pkg/new.py"] == "NEW = 1\n"
    assert "secret.py" not in files
    assert not any("__pycache__" in f for f in files)
    assert "-p evil" not in files["pyproject.toml"]  # pinned: as at the base
    assert root.resolve() != repo.resolve() and repo not in root.parents


def test_an_ignore_rule_written_during_the_run_neither_hides_nor_adds(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    base = git("rev-parse", "HEAD^{tree}", cwd=repo)
    (repo / ".gitignore").write_text("")  # un-ignore secret.py: the base's rules judge
    (repo / "secret.py").write_text("PLANTED = 1\n")
    root = _prepare(CheckTrees(tmp_path / "checks"), repo, base)
    assert not (root / "secret.py").exists()


def test_what_a_check_or_anyone_writes_in_the_tree_is_undone_by_the_next_sync(
    tmp_path: Path,
) -> None:
    repo = _repo(tmp_path)
    base = git("rev-parse", "HEAD^{tree}", cwd=repo)
    trees = CheckTrees(tmp_path / "checks")
    root = _prepare(trees, repo, base)
    code = root / "pkg" / "code.py"
    stat = code.stat()
    code.write_text("VALUE = 99\n")  # same size as the original
    os.utime(code, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and the same mtime
    (root / "pkg" / "planted.py").write_text("x = 1\n")
    (root / "target").mkdir()
    (root / "target" / "out.class").write_text("built")
    root = _prepare(trees, repo, base)
    assert code.read_text() == "VALUE = 1\n"
    assert not (root / "pkg" / "planted.py").exists()
    assert not (root / "target").exists()


def test_a_link_planted_where_a_directory_belongs_is_not_written_through(
    tmp_path: Path,
) -> None:
    repo = _repo(tmp_path)
    base = git("rev-parse", "HEAD^{tree}", cwd=repo)
    trees = CheckTrees(tmp_path / "checks")
    root = _prepare(trees, repo, base)
    outside = tmp_path / "outside"
    outside.mkdir()
    import shutil

    shutil.rmtree(root / "pkg")
    (root / "pkg").symlink_to(outside, target_is_directory=True)
    root = _prepare(trees, repo, base)
    assert not (root / "pkg").is_symlink()
    assert (root / "pkg" / "code.py").read_text() == "VALUE = 1\n"
    assert list(outside.iterdir()) == []


def test_an_unknown_stack_is_a_clear_error(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    with pytest.raises(TreeError, match="unknown stack 'cobol'"):
        CheckTrees(tmp_path / "checks").prepare("cobol", workdir=repo, git_dir=None, base=None)


def test_a_command_between_two_checks_of_the_same_tree_ends_the_baseline(
    tmp_path: Path,
) -> None:
    """The go cache's seed is saved as the baseline's checks left it, and the baseline
    ends at the first check after any command that is not a check (the model's commands
    may write the checks' directory), even on the same tree."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "go.mod").write_text("module example.com/m\n\ngo 1.19\n")
    (repo / "m.go").write_text("package m\n")
    git_repo(repo)
    base = git("rev-parse", "HEAD^{tree}", cwd=repo)
    seed = tmp_path / "seed"
    trees = CheckTrees(tmp_path / "checks", seed=seed)

    def check(writes: str) -> None:
        _root, env, _why = trees.prepare("go", workdir=repo, git_dir=None, base=base)
        (Path(env["GOCACHE"]) / writes).write_text(writes)
        trees.checked("go")

    check("tests-d")
    check("vet-d")  # the same tree, no command between: still the baseline's
    assert not seed.exists()
    run_process(["true"], cwd=repo, timeout_s=30)  # a command that is not a check
    check("after-a-command-d")
    assert _files(seed / "go" / "GOCACHE") == {"tests-d": "tests-d", "vet-d": "vet-d"}


def test_a_check_on_an_unchanged_diff_lists_no_tree_and_still_undoes_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _repo(tmp_path)
    base = git("rev-parse", "HEAD^{tree}", cwd=repo)
    (repo / "pkg" / "code.py").write_text("VALUE = 2\n")
    git("add", "-A", cwd=repo)
    target = git("write-tree", cwd=repo)
    real = shutil.which("git")
    log, shim = tmp_path / "git.log", tmp_path / "bin" / "git"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{log}"\nexec "{real}" "$@"\n')
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim.parent}{os.pathsep}{os.environ['PATH']}")
    trees = CheckTrees(tmp_path / "checks")

    def prepare() -> Path:
        root, _env, _ = trees.prepare(
            "python", workdir=repo, git_dir=None, base=base, snapshot=lambda _: target
        )
        return root

    root = prepare()
    listed = sum(" ls-tree " in f" {c} " for c in log.read_text().splitlines())
    assert listed == 2  # the snapshot's files, the base's pinned ones
    (root / "pkg" / "code.py").write_text("VALUE = 3\n")  # a check wrote in its tree
    (root / "pkg" / "planted.py").write_text("x = 1\n")
    root = prepare()
    calls = log.read_text().splitlines()
    # tree ids name their content: the same pair is not listed again
    assert sum(" ls-tree " in f" {c} " for c in calls) == listed, calls
    assert (root / "pkg" / "code.py").read_text() == "VALUE = 2\n"
    assert not (root / "pkg" / "planted.py").exists()


def _crate(tmp_path: Path) -> Path:
    repo = tmp_path / "crate"
    (repo / "src").mkdir(parents=True)
    (repo / "Cargo.toml").write_text('[package]\nname = "c"\nversion = "0.1.0"\n')
    (repo / "src" / "lib.rs").write_text("pub fn f() -> i32 { 1 - 2 }\n")
    (repo / "src" / "other.rs").write_text("pub fn g() {}\n")
    return git_repo(repo)


def test_a_dated_seed_dates_back_only_the_files_it_was_built_from(tmp_path: Path) -> None:
    """Cargo judges a build fresh when it is newer than its sources: a run's check tree
    dates back exactly the files whose path and blob the seeded build was made from, and
    a same-size edit is written now (so cargo builds it again)."""
    repo = _crate(tmp_path)
    base = git("rev-parse", "HEAD^{tree}", cwd=repo)
    seed = tmp_path / "seed"
    first = CheckTrees(tmp_path / "run1", seed=seed)
    root, env, _ = first.prepare("rust", workdir=repo, git_dir=None, base=base)
    target = Path(env["CARGO_TARGET_DIR"])
    (target / "debug").mkdir(parents=True)
    (target / "debug" / "libc.rlib").write_text("built from the base")
    first.checked("rust")
    (repo / "src" / "other.rs").write_text("pub fn g() { todo!() }\n")  # the model's turn
    first.prepare("rust", workdir=repo, git_dir=None, base=base)  # saves the seed
    saved = seed / "rust" / "CARGO_TARGET_DIR"
    assert (saved / "debug" / "libc.rlib").read_text() == "built from the base"
    built = (saved / "debug" / "libc.rlib").stat().st_mtime_ns
    git("checkout", "--", "src/other.rs", cwd=repo)

    (repo / "src" / "lib.rs").write_text("pub fn f() -> i32 { 1 + 2 }\n")  # same size
    second = CheckTrees(tmp_path / "run2", seed=seed)
    root, env, _ = second.prepare("rust", workdir=repo, git_dir=None, base=base)
    copied = Path(env["CARGO_TARGET_DIR"]) / "debug" / "libc.rlib"
    assert copied.read_text() == "built from the base"
    assert copied.stat().st_mtime_ns == built  # copied with its date
    assert not (Path(env["CARGO_TARGET_DIR"]) / ".looprun-sources.json").exists()
    assert (root / "src" / "other.rs").stat().st_mtime == SOURCE_DATE  # as built from
    assert (root / "Cargo.toml").stat().st_mtime == SOURCE_DATE
    edited = (root / "src" / "lib.rs").stat().st_mtime
    assert edited > built / 1e9 and (root / "src" / "lib.rs").read_text().endswith("1 + 2 }\n")
    # written again later in the run (a check touched it): dated now, like any rewrite
    (root / "src" / "other.rs").write_text("planted\n")
    second.prepare("rust", workdir=repo, git_dir=None, base=base)
    assert (root / "src" / "other.rs").read_text() == "pub fn g() {}\n"
    assert (root / "src" / "other.rs").stat().st_mtime > built / 1e9


def _stable(tmp_path: Path, run: str, repo: Path) -> CheckTrees:
    return CheckTrees(tmp_path / "checks" / run, stable=tmp_path / "kept")


def test_a_working_tree_s_check_tree_is_at_the_same_place_in_every_run(tmp_path: Path) -> None:
    """What an earlier run's check left in the tree (a planted module, a link where a
    directory belongs, a link in place of the whole tree) counts for nothing: the next
    run's first check finds the diff's files only, and nothing written through a link."""
    repo = _repo(tmp_path)
    base = git("rev-parse", "HEAD^{tree}", cwd=repo)
    outside = tmp_path / "outside"
    outside.mkdir()
    first = _stable(tmp_path, "run1", repo)
    root = _prepare(first, repo, base)
    assert root == tmp_path / "kept" / "python"
    fresh = _files(root)
    (root / "planted.py").write_text("PLANTED = 1\n")  # what a check of run 1 left
    shutil.rmtree(root / "pkg")
    (root / "pkg").symlink_to(outside, target_is_directory=True)
    first.close()

    second = _stable(tmp_path, "run2", repo)
    assert _prepare(second, repo, base) == root
    assert _files(root) == fresh
    assert not list(outside.iterdir())  # nothing written through the link
    second.close()

    shutil.rmtree(root)
    root.symlink_to(outside, target_is_directory=True)  # the tree itself a link
    third = _stable(tmp_path, "run3", repo)
    assert _prepare(third, repo, base) == root and not root.is_symlink()
    assert not list(outside.iterdir())
    assert _files(root) == fresh


def test_a_run_that_cannot_hold_the_kept_trees_builds_its_own(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    base = git("rev-parse", "HEAD^{tree}", cwd=repo)
    holding = _stable(tmp_path, "run1", repo)
    assert _prepare(holding, repo, base) == tmp_path / "kept" / "python"
    other = _stable(tmp_path, "run2", repo)  # while the first still holds them
    assert _prepare(other, repo, base) == tmp_path / "checks" / "run2" / "tree" / "python"
    assert other.writable(["python"]) == (tmp_path / "checks" / "run2",)
    holding.close()
    assert holding.writable(["python"])[1:] == (tmp_path / "kept" / "python",)


def test_kept_trees_are_one_per_working_tree(tmp_path: Path) -> None:
    env = {"LOOPRUN_CACHE_DIR": str(tmp_path / "cache")}
    one, two = tmp_path / "one", tmp_path / "two"
    assert trees_home(one, env) != trees_home(two, env)
    assert trees_home(one, env) == trees_home(tmp_path / "x" / ".." / "one", env)
    assert trees_home(one, env).parent == tmp_path / "cache" / "trees"
