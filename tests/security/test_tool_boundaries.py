"""Model-proposed tool calls stay inside the workdir, whatever an allowed pattern matches.

Real directories, a real pytest run through the ``run`` tool, and a canary directory
beside the workdir that must survive every attempt.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from looprun.act.policy import Policy
from looprun.act.tools import Toolbox
from looprun.errors import PolicyViolation
from looprun.models.base import ToolCall
from looprun.template.model import Constraints, PathRules

PY = Path(sys.executable).name
CONSTRAINTS = Constraints(
    paths=PathRules(allow=("src/**", "tests/**")),
    commands=(f"{PY} -m pytest *", "ruff check *", "cat /etc/hostname"),
    command_timeout_s=60,
)


@pytest.fixture
def arena(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    (work / "tests").mkdir(parents=True)
    (work / "src").mkdir()
    (work / ".git").mkdir()
    (work / "tests" / "test_a.py").write_text("def test_a(tmp_path):\n    assert tmp_path\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "precious.txt").write_text("keep me\n")
    (work / "src" / "out_link").symlink_to(tmp_path / "outside")
    return work


def _run(work: Path, command: str) -> tuple[str, str | None]:
    box = Toolbox(work, CONSTRAINTS, ["run"])
    result = box.call(ToolCall("1", "run", {"command": command}))
    return result.content, result.violation.rule if result.violation else None


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        (f"{PY} -m pytest -q --basetemp=../outside tests", "command.path_outside"),
        (f"{PY} -m pytest -q --basetemp ../outside tests", "command.path_outside"),
        (f"{PY} -m pytest -q --basetemp=src/out_link tests", "command.path_outside"),
        (f"{PY} -m pytest -q --basetemp=.git tests", "command.path_protected"),
        (f"{PY} -m pytest -q --basetemp=. tests", "command.path_protected"),
        (f"{PY} -m pytest -q --basetemp=tests", "command.path_protected"),
        (f"{PY} -m pytest -q --rootdir=/ tests", "command.path_outside"),
        (f"{PY} -m pytest -c/etc/passwd", "command.path_outside"),
        (f"{PY} -m pytest -o cache_dir=/tmp/elsewhere", "command.path_outside"),
        (f"{PY} -m pytest ../outside", "command.path_outside"),
        ("ruff check --cache-dir=.GIT/x src", "command.path_protected"),
    ],
)
def test_command_arguments_naming_paths_outside_or_protected_are_refused(
    arena: Path, command: str, rule: str
) -> None:
    content, got = _run(arena, command)
    assert got == rule, content
    assert (arena.parent / "outside" / "precious.txt").read_text() == "keep me\n"
    assert (arena / "tests" / "test_a.py").exists()


def test_a_fresh_basetemp_inside_the_workdir_still_runs_pytest(arena: Path) -> None:
    content, rule = _run(arena, f"{PY} -m pytest -q -p no:cacheprovider --basetemp=.bt tests")
    assert rule is None, content
    assert "exit code 0" in content and "1 passed" in content
    assert (arena.parent / "outside" / "precious.txt").exists()


def test_absolute_paths_the_template_author_wrote_are_allowed(arena: Path) -> None:
    pol = Policy(arena, CONSTRAINTS)
    assert pol.check_command("cat /etc/hostname") == ["cat", "/etc/hostname"]
    assert pol.check_command(f"{PY} -m pytest -q tests/test_a.py")[-1] == "tests/test_a.py"


@pytest.mark.parametrize(
    "path",
    [
        ".GIT/config",
        ".git./config",
        ".git /config",
        ".g\u200cit/config",
        "\ufeff.git/hooks/pre-commit",
        "GIT~1/config",
        "src/.LoopRun/state.json",
    ],
)
def test_names_that_alias_git_on_some_file_system_are_protected(arena: Path, path: str) -> None:
    pol = Policy(arena, Constraints(paths=PathRules(allow=("**",))))
    with pytest.raises(PolicyViolation) as info:
        pol.check_path(path, write=True)
    assert info.value.rule in ("path.git", "path.looprun")
    assert not pol.readable(path)


def test_oversized_writes_are_refused_without_touching_the_file(arena: Path) -> None:
    box = Toolbox(arena, CONSTRAINTS, ["write_file", "edit_file"])
    box.max_write_bytes = 1000
    big = box.call(ToolCall("1", "write_file", {"path": "src/big.py", "content": "x" * 1001}))
    assert big.is_error and "limited to 1000 bytes" in big.content
    assert not (arena / "src" / "big.py").exists()
    ok = box.call(ToolCall("2", "write_file", {"path": "src/a.py", "content": "A\n"}))
    assert not ok.is_error
    grow = box.call(ToolCall("3", "edit_file", {"path": "src/a.py", "old": "A", "new": "B" * 2000}))
    assert grow.is_error and "limited to 1000 bytes" in grow.content
    assert (arena / "src" / "a.py").read_text() == "A\n"
