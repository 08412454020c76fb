"""Boundaries outside the tools: expressions a model writes, the engine's own git calls,
and error messages on the way to the terminal.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest
from tests.support.cli import looprun
from tests.support.git_repos import git_repo

from looprun.errors import ExpressionError, Location, TemplateError
from looprun.template.expressions import compile_condition
from looprun.workspace.tree import Workspace

SECRET = "sk-sec-7c1d9e0a55b34f2e"


@pytest.mark.parametrize(
    "source",
    ["'a' * 10**10 == ''", "(iteration * 1000000000) * 'ab' == ''", "iteration ** (10**8) > 0"],
)
def test_conditions_cannot_build_huge_values(source: str) -> None:
    cond = compile_condition(source, Location("plan task t"))
    started = time.monotonic()
    with pytest.raises(ExpressionError, match="not allowed"):
        cond.evaluate({"iteration": 9})
    assert time.monotonic() - started < 1.0


def test_ordinary_arithmetic_still_works() -> None:
    cond = compile_condition(
        "'ab' * 3 == 'ababab' and 2 ** 10 == 1024 and [0] * 2 == [0, 0]", Location("x")
    )
    assert cond.evaluate({}) is True


@pytest.mark.parametrize(
    "source",
    [
        "'x' | center(10**9) == ''",
        "'a' | replace('a', 'aa') == ''",
        "tests.failed.__class__ == 1",
        "lipsum(1000) == ''",
        "tests.failed > 0 or " + "1 == 1 or " * 100 + "true",
    ],
)
def test_model_written_conditions_are_held_to_a_safe_subset(source: str) -> None:
    with pytest.raises(TemplateError):
        compile_condition(source, Location("plan task t"), untrusted=True)
    compile_condition(
        "tests.failed == 0 and matching(diff.files, 'src/**') | length > 0",
        Location("plan task t"),
        untrusted=True,
    )


def _hook(repo: Path, name: str, marker: Path) -> None:
    hook = repo / ".git" / "hooks" / name
    hook.write_text(f'#!/bin/sh\necho "$PAYMENTS_API_KEY" >> {marker}\n')
    hook.chmod(hook.stat().st_mode | stat.S_IEXEC)


def test_engine_git_calls_run_no_repository_hooks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.txt").write_text("a\n")
    git_repo(repo)
    marker = tmp_path / "hook-ran.txt"
    for name in ("post-checkout", "reference-transaction", "pre-commit", "post-index-change"):
        _hook(repo, name, marker)
    monkeypatch.setenv("PAYMENTS_API_KEY", SECRET)
    ws = Workspace.open(repo, state_dir=repo / ".looprun")
    ws.checkpoint("first")
    (repo / "a.txt").write_text("changed\n")
    ws.checkpoint("second")
    ws.restore("first")
    ws.add_worktree(tmp_path / "wt", "looprun/t", "HEAD")
    assert (repo / "a.txt").read_text() == "a\n"
    assert (tmp_path / "wt" / "a.txt").exists()
    assert not marker.exists(), marker.read_text()


def test_cli_error_messages_are_redacted(tmp_path: Path) -> None:
    template = tmp_path / "t.yaml"
    template.write_text(
        "looprun: 1\nname: t\ninputs:\n  n: {type: integer, default: 1}\nplan: {mode: none}\n"
        "act: {prompt: go, tools: [read_file]}\nobserve:\n  d: {parser: git_diff}\n"
        "exit: [d.ok]\nrefine:\n  - else: {escalate: stop}\nlimits: {max_iterations: 1}\n"
    )
    work = tmp_path / "work"
    git_repo(work)
    proc = looprun(
        str(template),
        "--intent",
        "x",
        "--set",
        f"n={SECRET}",
        "--model",
        "script:none.yaml",
        cwd=work,
        env={"PAYMENTS_API_KEY": SECRET},
    )
    assert proc.returncode != 0
    assert "--set n=" in proc.stderr, proc.stderr
    assert SECRET not in proc.stderr + proc.stdout
    assert os.environ.get("PAYMENTS_API_KEY") != SECRET


def test_restore_never_writes_through_a_symlink_out_of_the_workdir(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "a").mkdir(parents=True)
    (repo / "a" / "f.txt").write_text("inside\n")
    git_repo(repo)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("keep\n")
    ws = Workspace.open(repo, state_dir=repo / ".looprun")
    ws.checkpoint("before")
    (repo / "a" / "f.txt").unlink()
    (repo / "a").rmdir()
    (repo / "a").symlink_to(outside)  # a directory replaced by a link out
    ws.restore("before")
    assert not (repo / "a").is_symlink()
    assert (repo / "a" / "f.txt").read_text() == "inside\n"
    assert (outside / "f.txt").read_text() == "keep\n"
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt"]
