"""Feedback from real pytest runs: a doctest keeps its `Expected:`/`Got:` lines, and many
failures with one cause are one message with every id, inside the 4 KB bound."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

MODULE = '''\
def add(a, b):
    """Add two numbers.

    >>> add(1, 2)
    3
    >>> add(2, 2)
    4
    """
    return a + b + (1 if b == 2 else 0)


def label(n):
    """
    >>> label(3)
    'three'
    """
    return "3"
'''

PARAMETRIZED = """\
import pytest
from calc import add


@pytest.mark.parametrize("n", range(150))
def test_add_one_to_every_number_of_a_long_range(n):
    assert add(n, 1) == n + 2, "add is off by one"
"""

DISTINCT = """\
def test_upper():
    assert "a".upper() == "b"


def test_keys():
    assert {"x": 1} == {"y": 1}
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A real pytest run: two failing doctests, 150 failures of one cause, two others."""
    root = tmp_path_factory.mktemp("project")
    (root / "calc.py").write_text(MODULE, encoding="utf-8")
    (root / "tests").mkdir()
    (root / "tests" / "test_range.py").write_text(PARAMETRIZED, encoding="utf-8")
    (root / "tests" / "test_other.py").write_text(DISTINCT, encoding="utf-8")
    (root / "pyproject.toml").write_text("[tool.pytest.ini_options]\npythonpath = ['.']\n")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--doctest-modules",
            "--junitxml=junit.xml",
            "calc.py",
            "tests",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 1, run.stdout[-2000:]
    observed = subprocess.run(
        [sys.executable, "-m", "looprun", "observe", "junit", "junit.xml", "--workdir", "."],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert observed.returncode == 1, observed.stderr
    return root, json.loads(observed.stdout)


def test_doctest_failures_keep_expected_and_got(report: tuple[Path, dict]) -> None:
    _, obs = report
    feedback = obs["feedback"]
    assert "calc.py::calc.add (calc.py:4): doctest >>> add(1, 2): expected 3, got 4" in feedback
    assert textwrap.indent("Expected:\n    3\nGot:\n    4", "    ") in feedback
    assert "doctest >>> label(3): expected 'three', got '3'" in feedback
    assert textwrap.indent("Expected:\n    'three'\nGot:\n    '3'", "    ") in feedback


def test_one_cause_is_one_message_naming_every_id_within_4kb(report: tuple[Path, dict]) -> None:
    _, obs = report
    feedback = obs["feedback"]
    assert obs["failed"] == 154 and len(obs["failing"]) == 154
    assert len(feedback.encode("utf-8")) <= 4096
    assert "... and" not in feedback  # nothing left unnamed
    head = "150 fail with one cause (tests/test_range.py:7): AssertionError: add is off by one"
    assert head in feedback
    ids = re.search(
        r"ids: tests/test_range\.py::test_add_one_to_every_number_of_a_long_range"
        r"\[([^\]]*)\]",
        feedback,
    )
    assert ids is not None
    assert ids.group(1) == "0-149"  # the numeric parameters as one run
    assert feedback.count("AssertionError: add is off by one") <= 2  # once, and its E line
    # every failing id is named: grouped, or on its own line
    for tid in obs["failing"]:
        base = tid.partition("[")[0]
        assert base in feedback, tid
    assert "tests/test_other.py::test_upper (tests/test_other.py:2): AssertionError" in feedback
    assert "tests/test_other.py::test_keys" in feedback
