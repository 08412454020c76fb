"""The real package the ``test_real_package_*`` modules run on: ``inflection`` 0.5.1
fetched as its source distribution, a copy with a bug planted, and the scripted turns
and runs those modules share (the ``sdist`` fixture is in ``conftest.py``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import git_init, journal_events, scripted_bugfix

PACKAGE, VERSION = "inflection", "0.5.1"
BUG = ("    if number % 100 in (11, 12, 13):\n", "    if number % 100 in (11, 12):\n")
NEW_TEST = "test_teens.py"
NEW_TEST_ID = "test_teens.py::test_numbers_ending_in_13_take_th"
_OFFLINE = (
    "NewConnectionError",
    "Max retries exceeded",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "Connection refused",
    "ConnectTimeout",
    "ReadTimeout",
)


def fetch_sdist(where: Path) -> Path:
    """The package's source distribution, downloaded into ``where`` and unpacked; the
    test is skipped when the package index cannot be reached."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            f"{PACKAGE}=={VERSION}",
            "-d",
            str(where),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    said = proc.stdout + proc.stderr
    if proc.returncode != 0 and any(marker in said for marker in _OFFLINE):
        pytest.skip(f"the package index is unreachable, so {PACKAGE} cannot be fetched")
    assert proc.returncode == 0, said
    (archive,) = where.glob(f"{PACKAGE}-{VERSION}.tar.gz")
    with tarfile.open(archive) as tar:
        try:
            tar.extractall(where, filter="data")
        except TypeError:  # a Python without extraction filters: check the names instead
            assert all(not m.name.startswith(("/", "..")) for m in tar.getmembers())
            tar.extractall(where)
    return where / f"{PACKAGE}-{VERSION}"


def planted_project(sdist: Path, tmp: Path, bug: tuple[str, str] = BUG) -> Path:
    """The sdist with ``bug`` planted (the line, then its buggy form), committed."""
    work = tmp / PACKAGE
    shutil.copytree(sdist, work, ignore=shutil.ignore_patterns("*.egg-info"))
    code = work / PACKAGE / "__init__.py"
    text = code.read_text()
    assert bug[0] in text
    code.write_text(text.replace(bug[0], bug[1]))
    return git_init(work)


# the holdout role's answer: two variants that fail on the unfixed code as the new test
# does, and one the unfixed code passes (dropped by the triage, so it blocks nothing)
VARIANTS_TURN = {
    "role": "holdout",
    "text": "```python\nfrom inflection import ordinal\n\n\n"
    "def test_variant_1():\n    assert ordinal(213) == 'th'\n\n\n"
    "def test_variant_2():\n    assert ordinal(1013) == 'th'\n\n\n"
    "def test_variant_3():\n    assert ordinal(3) == 'rd'\n```\n",
}


def reproduce_turns() -> list[dict[str, Any]]:
    test = (
        "from inflection import ordinal\n\n\n"
        "def test_numbers_ending_in_13_take_th():\n"
        '    assert ordinal(113) == "th"\n'
    )
    return [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": NEW_TEST, "content": test}}]},
        {"text": "The new test fails: ordinal(113) says 'rd'."},
    ]


def edit_turns(path: str, old: str, new: str, said: str) -> list[dict[str, Any]]:
    call = {"name": "edit_file", "arguments": {"path": path, "old": old, "new": new}}
    return [{"tool_calls": [call]}, {"text": said}]


def run_bugfix(
    work: Path, tmp: Path, turns: list[dict[str, Any]], *extra: str, template: str = "bugfix"
) -> dict[str, Any]:
    return scripted_bugfix(
        work,
        turns,
        "ordinal() gives 'rd' for 113 and 13; numbers ending in 11, 12 and 13 take 'th'.",
        "--set",
        "tests_glob=test_*.py",
        *extra,
        template=template,
    )


def run_events(summary: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return journal_events(summary["run_dir"], kind)


def run_suite(work: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=600,
    )


def write_call(path: str, content: str) -> dict[str, Any]:
    return {"name": "write_file", "arguments": {"path": path, "content": content}}
