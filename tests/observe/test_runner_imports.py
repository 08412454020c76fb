"""The runners in ``observe/pytest_plugin/`` run inside the project's own interpreter,
where looprun is not installed (a project's test environment holds its own packages):
each imports only the standard library, pytest and its siblings there."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PLUGIN_DIR = (
    Path(__file__).resolve().parents[2] / "engine" / "looprun" / "observe" / "pytest_plugin"
)
RUNNERS = sorted(PLUGIN_DIR.glob("*.py"))


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("runner", RUNNERS, ids=lambda p: p.name)
def test_a_runner_imports_nothing_the_tests_interpreter_may_lack(runner: Path) -> None:
    allowed = set(sys.stdlib_module_names) | {"__future__", "pytest", "_pytest"}
    allowed |= {p.stem for p in RUNNERS}
    assert _imported(runner) - allowed == set()


def test_the_runners_are_found() -> None:
    assert {p.stem for p in RUNNERS} >= {"looprun_outcome", "looprun_plain", "looprun_mutants"}
