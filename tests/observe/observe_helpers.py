"""Helpers that make real reports: a tiny project with a bug, run through real pytest."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from looprun.observe.outcome_channel import PLUGIN_DIR

REPO = Path(__file__).resolve().parents[2]
SHARED_FIXTURES = REPO.parent / "shared" / "fixtures"

INVOICE = """\
def total(lines):
    result = 0
    for amount in lines:
        result += amount
    return result - 1  # the bug


def average(lines):
    return total(lines) / len(lines)
"""

TESTS = """\
from invoice import average, total


def test_total():
    got = total([40, 2])
    assert got == 42, f"expected 42, got {got}"


def test_average_empty():
    assert average([]) == 0


def test_ok():
    assert 1 + 1 == 2


class TestGroup:
    def test_member(self):
        assert total([1]) == 1
"""


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), "utf-8")


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=False)


def runner_env() -> dict[str, str]:
    """The environment of looprun's in-test runners started by hand: their own folder on
    the path, a bare PATH, and the suite's pytest options (its own plugins left out)."""
    return {
        "PYTHONPATH": str(PLUGIN_DIR),
        "PATH": "/usr/bin:/bin",
        "PYTEST_ADDOPTS": os.environ.get("PYTEST_ADDOPTS", ""),
    }


def pytest_argv(*extra: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *extra]


@pytest.fixture
def buggy_project(tmp_path: Path) -> Path:
    """A project whose suite has 3 failing tests (2 failures, 1 error-raising) and 1 pass."""
    root = tmp_path / "proj"
    write(
        root,
        {
            "src/invoice.py": INVOICE,
            "tests/test_invoice.py": TESTS,
            "tests/conftest.py": "import sys, pathlib\n"
            "sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / 'src'))\n",
        },
    )
    return root


@pytest.fixture
def junit_report(buggy_project: Path) -> tuple[Path, Path, int]:
    """(project, report, exit code) of a real pytest run writing JUnit XML."""
    report = buggy_project / "junit.xml"
    proc = run(pytest_argv("-q", f"--junitxml={report}"), buggy_project)
    assert report.is_file(), proc.stdout
    return buggy_project, report, proc.returncode


def shared(*parts: str) -> Path:
    path = SHARED_FIXTURES.joinpath(*parts)
    if not path.exists():
        pytest.skip("shared fixtures not available")
    return path
