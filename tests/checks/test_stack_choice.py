"""Which pack a built-in template composes, through the real CLI in real repositories:
detected from marker files, chosen with --set, recorded with the run; two stacks, none, an
unknown one or a missing toolchain stop before anything starts, with nothing changed."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import yaml
from tests.support.cli import looprun
from tests.support.git_repos import git, git_repo

from looprun.checks import stacks
from looprun.checks.stacks.detect import ambient, detect

_SCRIPT = [{"text": "nothing to do"}]


def _python_repo(path: Path, *extra: str) -> Path:
    (path / "pkg").mkdir(parents=True)
    (path / "pkg" / "__init__.py").write_text("def one():\n    return 1\n")
    (path / "tests").mkdir()
    (path / "tests" / "test_one.py").write_text(
        "from pkg import one\n\n\ndef test_one():\n    assert one() == 1\n"
    )
    (path / "pyproject.toml").write_text("[project]\nname = 'pkg'\nversion = '0'\n")
    for name in extra:
        (path / name).write_text("")
    return git_repo(path)


def _bugfix(repo: Path, *extra: str, env: dict[str, str] | None = None):
    script = repo.parent / "script.yaml"
    script.write_text(yaml.safe_dump(_SCRIPT))
    return looprun(
        "bugfix",
        "--intent",
        "one() is wrong",
        "--model",
        f"script:{script}",
        "--json",
        "--max-iterations",
        "1",
        *extra,
        cwd=repo,
        env=env,
    )


def _untouched(repo: Path) -> None:
    assert git("status", "--porcelain", cwd=repo) == ""
    assert not (repo / ".looprun" / "runs").exists() or not any(
        (repo / ".looprun" / "runs").iterdir()
    )


def test_the_marker_file_picks_the_pack_and_the_run_records_it(tmp_path: Path) -> None:
    repo = _python_repo(tmp_path / "repo")
    proc = _bugfix(repo)
    assert "stack: python (pyproject.toml at the repository's root)" in proc.stderr
    summary = json.loads(proc.stdout)
    invocation = json.loads((Path(summary["run_dir"]) / "run.json").read_text())
    assert invocation["stack"] == "python"
    assert invocation["sets"]["stack"] == "python"


def test_two_stacks_are_never_guessed(tmp_path: Path) -> None:
    other = next(s for s in stacks.names() if s != "python")
    marker = stacks.get(other).markers[0]
    repo = _python_repo(tmp_path / "repo", marker)
    proc = _bugfix(repo)
    assert proc.returncode == 2, proc.stderr
    assert "more than one stack" in proc.stderr
    assert "python (pyproject.toml)" in proc.stderr and f"{other} ({marker})" in proc.stderr
    assert "--set stack=NAME" in proc.stderr and "Traceback" not in proc.stderr
    _untouched(repo)
    chosen = _bugfix(repo, "--set", "stack=python")  # the user's choice settles it
    assert "stack: python (--set stack=python)" in chosen.stderr, chosen.stderr


def test_a_repository_with_no_stack_names_the_packs(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README").write_text("words\n")
    git_repo(repo)
    proc = _bugfix(repo)
    assert proc.returncode == 2, proc.stderr
    assert "no stack recognised" in proc.stderr and "--set stack=NAME" in proc.stderr
    assert all(name in proc.stderr for name in stacks.names())
    _untouched(repo)


def test_an_unknown_stack_is_a_usage_error(tmp_path: Path) -> None:
    repo = _python_repo(tmp_path / "repo")
    proc = _bugfix(repo, "--set", "stack=cobol")
    assert proc.returncode == 2, proc.stderr
    assert "for stack 'cobol'" in proc.stderr and "python" in proc.stderr
    _untouched(repo)


def test_a_missing_toolchain_stops_before_any_model_call(tmp_path: Path) -> None:
    repo = _python_repo(tmp_path / "repo")
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("git",):  # the engine's own needs, and nothing of the stack's
        os.symlink(shutil.which(tool), bare / tool)
    env = {**os.environ, "PATH": str(bare)}
    proc = _bugfix(repo, env=env)
    assert proc.returncode == 1, proc.stderr
    assert "observer 'tests' (python stack) cannot run" in proc.stderr
    assert "install Python" in proc.stderr and "Traceback" not in proc.stderr


def test_source_files_decide_where_no_marker_does(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "util.py").write_text("")
    found = detect(tmp_path)
    assert found.name == "python" and "lib/util.py" in found.why
    assert ambient(tmp_path / "nowhere").name == "python"  # outside a run: the default


def test_explain_says_which_pack_and_why(tmp_path: Path) -> None:
    repo = _python_repo(tmp_path / "repo")
    proc = looprun("explain", "bugfix", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert "stack: python (pyproject.toml at the repository's root)" in proc.stdout


def test_a_team_template_that_includes_a_pack_chooses_the_stack_of_a_monorepo(
    tmp_path: Path,
) -> None:
    """A template that extends a built-in and includes one stack's pack composes the
    built-in's own pack slot in that stack: validate, explain and a run agree, the run
    records it, and --set stack= still wins over the template."""
    repo = _python_repo(tmp_path / "repo", "package.json")  # python and node at the root
    (repo / "package.json").write_text('{"name": "x", "scripts": {"test": "node --test"}}')
    team = repo / "team.yaml"
    team.write_text(
        "looprun: 1\nname: team_bugfix\ndescription: bugfix on the python half\n"
        "extends: bugfix\ninclude: [observers/python.yaml]\n"
    )
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "team template", cwd=repo)
    valid = looprun("validate", "team.yaml", cwd=repo)
    assert valid.returncode == 0, valid.stderr
    explained = looprun("explain", "team.yaml", cwd=repo)
    assert "stack: python (the template includes observers/python.yaml)" in explained.stdout

    script = repo.parent / "script.yaml"
    script.write_text(yaml.safe_dump(_SCRIPT))
    run = ["team.yaml", "--intent", "one() is wrong", "--model", f"script:{script}"]
    proc = looprun(*run, "--json", "--max-iterations", "1", cwd=repo)
    assert "stack: python (the template includes observers/python.yaml)" in proc.stderr
    invocation = json.loads((Path(json.loads(proc.stdout)["run_dir"]) / "run.json").read_text())
    assert invocation["stack"] == "python"

    plain = _bugfix(repo)  # the built-in alone still refuses to guess
    assert plain.returncode == 2 and "more than one stack" in plain.stderr
