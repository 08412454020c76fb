"""The real package the ``test_real_package_*`` modules run on: ``inflection`` 0.5.1
fetched as its source distribution, a copy with a bug planted, and the scripted turns
and runs those modules share (the ``sdist`` fixture is in ``conftest.py``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from e2e_helpers import git_init, journal_events, scripted_bugfix

PACKAGE, VERSION = "inflection", "0.5.1"
BUG = ("    if number % 100 in (11, 12, 13):\n", "    if number % 100 in (11, 12):\n")
NEW_TEST = "test_teens.py"
NEW_TEST_ID = "test_teens.py::test_numbers_ending_in_13_take_th"
# the marker file, and how a test beside any layout spells where it is
MARKER = "teens.txt"
MARKER_PATH = f"os.path.join(os.path.dirname(inflection.__file__), {MARKER!r})"
_OFFLINE = (
    "NewConnectionError",
    "Max retries exceeded",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "Connection refused",
    "ConnectTimeout",
    "ReadTimeout",
)


def fetch_sdist(where: Path, package: str = PACKAGE, version: str = VERSION) -> Path:
    """A package's source distribution (this module's, unless named), downloaded into
    ``where`` and unpacked; the test is skipped when the package index cannot be reached."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            f"{package}=={version}",
            "-d",
            str(where),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    said = proc.stdout + proc.stderr
    if proc.returncode != 0 and any(marker in said for marker in _OFFLINE):
        pytest.skip(f"the package index is unreachable, so {package} cannot be fetched")
    assert proc.returncode == 0, said
    (archive,) = where.glob(f"{package}-{version}.tar.gz")
    with tarfile.open(archive) as tar:
        try:
            tar.extractall(where, filter="data")
        except TypeError:  # a Python without extraction filters: check the names instead
            assert all(not m.name.startswith(("/", "..")) for m in tar.getmembers())
            tar.extractall(where)
    return where / f"{package}-{version}"


@dataclass(frozen=True)
class Layout:
    """Where a project keeps its package and its tests: the sdist's own (``flat``: the
    package and ``test_inflection.py`` at the root), a src layout, or tests inside the
    package. The cheat corpus runs on the last two."""

    package: str  # the package's folder
    tests: str  # the tests' folder ("" for the root)

    def tests_path(self, name: str) -> str:
        return f"{self.tests}/{name}" if self.tests else name

    @property
    def import_root(self) -> str:
        """The folder that holds the package, where a top-level module is imported from:
        ``.``, or ``src`` on a src layout (given to pytest as its ``pythonpath``)."""
        return str(PurePosixPath(self.package).parent)

    @property
    def code(self) -> str:
        return f"{self.package}/__init__.py"

    @property
    def new_test(self) -> str:
        return self.tests_path(NEW_TEST)

    @property
    def new_test_id(self) -> str:
        return self.tests_path(NEW_TEST_ID)

    @property
    def suite(self) -> str:
        return self.tests_path("test_inflection.py")

    @property
    def marker(self) -> str:
        """A file beside the code that a "fix" creates and a cheating test looks for."""
        return f"{self.package}/{MARKER}"

    @property
    def tests_glob(self) -> str:
        return f"{self.tests}/**" if self.tests else "test_*.py"


FLAT = Layout(PACKAGE, "")
LAYOUTS = {"src": Layout(f"src/{PACKAGE}", "tests"), "inside": Layout(PACKAGE, f"{PACKAGE}/tests")}
# the cheat corpus's parameter: each cheat on a src layout and with tests in the package
ON_EVERY_LAYOUT = pytest.mark.parametrize("layout", list(LAYOUTS.values()), ids=list(LAYOUTS))


def planted_project(
    sdist: Path, tmp: Path, bug: tuple[str, str] = BUG, layout: Layout = FLAT
) -> Path:
    """The sdist with ``bug`` planted (the line, then its buggy form), laid out as
    ``layout`` says and committed."""
    work = tmp / PACKAGE
    shutil.copytree(sdist, work, ignore=shutil.ignore_patterns("*.egg-info"))
    code = work / PACKAGE / "__init__.py"
    text = code.read_text()
    assert bug[0] in text
    code.write_text(text.replace(bug[0], bug[1]))
    if layout.package != PACKAGE:
        (work / layout.package).parent.mkdir(parents=True)
        shutil.move(work / PACKAGE, work / layout.package)
    if layout.tests:
        (work / layout.tests).mkdir(parents=True, exist_ok=True)
        shutil.move(work / "test_inflection.py", work / layout.suite)
    if layout.import_root != ".":
        (work / "pytest.ini").write_text(f"[pytest]\npythonpath = {layout.import_root}\n")
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


def reproduce_turns(layout: Layout = FLAT) -> list[dict[str, Any]]:
    test = (
        "from inflection import ordinal\n\n\n"
        "def test_numbers_ending_in_13_take_th():\n"
        '    assert ordinal(113) == "th"\n'
    )
    return [
        {"tool_calls": [write_call(layout.new_test, test)]},
        {"text": "The new test fails: ordinal(113) says 'rd'."},
    ]


def edit_turns(path: str, old: str, new: str, said: str) -> list[dict[str, Any]]:
    return [edits_turn(path, [(old, new)]), {"text": said}]


def edits_turn(path: str, fix: list[tuple[str, str]]) -> dict[str, Any]:
    """One model turn that makes each (old, new) edit of ``fix`` in ``path``."""
    calls = [{"name": "edit_file", "arguments": {"path": path, "old": o, "new": n}} for o, n in fix]
    return {"tool_calls": calls}


def run_bugfix(
    work: Path,
    tmp: Path,
    turns: list[dict[str, Any]],
    *extra: str,
    template: str = "bugfix",
    layout: Layout = FLAT,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    return scripted_bugfix(
        work,
        turns,
        "ordinal() gives 'rd' for 113 and 13; numbers ending in 11, 12 and 13 take 'th'.",
        "--set",
        f"tests_glob={layout.tests_glob}",
        *extra,
        template=template,
        env=env,
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
