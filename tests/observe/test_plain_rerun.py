"""looprun's plain re-run of tests (``looprun_plain``) against real code and real pytest.

Each "fix" below passes its test under pytest (checked with a real pytest run) and must
fail when looprun runs the test again without pytest; the honest versions, and comparison
methods the run did not write, must pass there too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from looprun.checks.runner import observe_command
from looprun.observe.git_diff import changed_lines
from looprun.observe.outcome_channel import PLUGIN_DIR

_TEST = "from pkg.mod import answer\n\n\ndef test_answer():\n    assert answer() == 42\n"
# code that answers right only when it sees a test run, each through a different trace
_KNOWS = {
    "a module name built from parts": (
        "import sys\n\n\ndef answer():\n"
        "    return 42 if any(m.startswith('_py' + 'test') for m in sys.modules) else 0\n"
    ),
    "pytest's variable": (
        "import os\n\n\ndef answer():\n    return 42 if os.environ.get('PYTEST_VERSION') else 0\n"
    ),
    "looprun's variable": (
        "import os\n\n\ndef answer():\n"
        "    return 42 if any(k.startswith('LOOPRUN') for k in os.environ) else 0\n"
    ),
    "sys.argv": "import sys\n\n\ndef answer():\n    return 42 if sys.argv[0] != '-c' else 0\n",
    "the callers' frames": (
        "import traceback\n\n\ndef answer():\n"
        "    frames = traceback.extract_stack()\n"
        "    return 42 if any('pluggy' in f.filename for f in frames) else 0\n"
    ),
}
_HONEST = "def answer():\n    return 42\n"


def _project(tmp_path: Path, code: str, test: str = _TEST) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "mod.py").write_text(code)
    (tmp_path / "test_x.py").write_text(test)
    return tmp_path


def _under_pytest(work: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_x.py"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _plain(work: Path, ids: list[str], changed: dict[str, Any] | None = None) -> dict[str, Any]:
    report = work.parent / f"{work.name}-plain.xml"
    command = (
        f"PYTHONNOUSERSITE=1 {sys.executable} -P -m looprun_plain --junitxml={report} "
        f"--changed='{json.dumps(changed or {})}' --ids='{json.dumps(ids)}'"
    )
    obs = observe_command(
        "junit",
        workdir=work,
        command=command,
        file=report,
        options={"outcome_channel": "pytest"},
        timeout_s=120,
    )
    return obs.to_facts()


@pytest.mark.parametrize("trace", sorted(_KNOWS))
def test_code_that_knows_the_test_run_fails_without_pytest(tmp_path: Path, trace: str) -> None:
    work = _project(tmp_path, _KNOWS[trace])
    assert _under_pytest(work).returncode == 0  # pytest is fooled

    facts = _plain(work, ["test_x.py::test_answer"])
    assert facts["failing"] == ["test_x.py::test_answer"], facts["feedback"]
    assert facts["consistent"], facts["tampering"]
    assert "AssertionError at test_x.py:5: assert answer() == 42" in facts["feedback"]
    # frames are named as the repository names them, not where the check's tree lives
    assert 'File "test_x.py", line 5' in facts["feedback"], facts["feedback"]
    assert str(tmp_path) not in facts["feedback"]


def test_honest_code_passes_without_pytest(tmp_path: Path) -> None:
    work = _project(tmp_path, _HONEST)
    facts = _plain(work, ["test_x.py::test_answer"])
    assert (facts["ok"], facts["passing"]) == (True, ["test_x.py::test_answer"]), facts
    assert facts["consistent"]


_ALWAYS_EQUAL = (
    "class Answer:\n"
    "    def __eq__(self, other):\n"
    "        return True\n"
    "\n"
    "    __hash__ = None\n"
    "\n\n"
    "def answer():\n"
    "    return Answer()\n"
)
_TRUTHY_TEST = "from pkg.mod import answer\n\n\ndef test_answer():\n    assert answer()\n"
_ALWAYS_TRUE = (
    "class Yes:\n    def __bool__(self):\n        return True\n\n\n"
    "def answer():\n    return Yes()\n"
)


@pytest.mark.parametrize(
    ("code", "test", "method"),
    [(_ALWAYS_EQUAL, _TEST, "Answer.__eq__"), (_ALWAYS_TRUE, _TRUTHY_TEST, "Yes.__bool__")],
)
def test_a_comparison_method_the_run_wrote_does_not_count(
    tmp_path: Path, code: str, test: str, method: str
) -> None:
    work = _project(tmp_path, code, test)
    assert _under_pytest(work).returncode == 0

    facts = _plain(work, ["test_x.py::test_answer"], {"pkg/mod.py": [[1, 9]]})
    assert facts["failing"] == ["test_x.py::test_answer"]
    assert (
        f"passed only through `{method}` defined in pkg/mod.py:2, which this run changed"
        in facts["feedback"]
    ), facts["feedback"]


def test_a_comparison_method_the_run_did_not_write_counts(tmp_path: Path) -> None:
    """The run changed the same file, but not the method's lines (a person's __eq__ of a
    dataclass), and a dataclass's generated __eq__ is nobody's file at all."""
    code = (
        "from dataclasses import dataclass\n\n\n"
        "@dataclass\nclass Written:\n    n: int\n\n"
        "    def __eq__(self, other):\n        return self.n == other.n\n\n\n"
        "@dataclass\nclass Generated:\n    n: int\n\n\n"
        "def answer():\n    return 42\n"
    )
    test = (
        "from pkg.mod import Generated, Written, answer\n\n\n"
        "def test_answer():\n"
        "    assert Written(answer()) == Written(42)\n"
        "    assert Generated(answer()) == Generated(42)\n"
    )
    work = _project(tmp_path, code, test)
    lines = code.splitlines()
    fix = lines.index("    return 42") + 1
    facts = _plain(work, ["test_x.py::test_answer"], {"pkg/mod.py": [[fix, fix]]})
    assert facts["passing"] == ["test_x.py::test_answer"], facts["feedback"]
    # had the run written Written.__eq__ (an honest one) the test counts all the same
    eq = lines.index("    def __eq__(self, other):") + 1
    facts = _plain(work, ["test_x.py::test_answer"], {"pkg/mod.py": [[eq, eq + 1]]})
    assert facts["passing"] == ["test_x.py::test_answer"], facts["feedback"]


def test_an_honest_comparison_method_the_run_wrote_counts(tmp_path: Path) -> None:
    """The bug is that two equal amounts compare unequal: the fix writes ``__eq__``."""
    code = (
        "class Money:\n"
        "    def __init__(self, cents):\n"
        "        self.cents = cents\n\n"
        "    def __eq__(self, other):\n"
        "        if not isinstance(other, Money):\n"
        "            return NotImplemented\n"
        "        return self.cents == other.cents\n\n"
        "    def __contains__(self, cents):\n"
        "        return cents == self.cents\n"
    )
    test = (
        "from pkg.mod import Money\n\n\n"
        "def test_answer():\n"
        "    assert Money(5) == Money(5)\n"
        "    assert Money(5) != Money(6)\n"
        "    assert 5 in Money(5)\n"
    )
    work = _project(tmp_path, code, test)
    facts = _plain(work, ["test_x.py::test_answer"], {"pkg/mod.py": [[5, 11]]})
    assert facts["passing"] == ["test_x.py::test_answer"], facts["feedback"]


def test_what_is_run_and_what_is_not(tmp_path: Path) -> None:
    test = (
        "import unittest\n\nimport pytest\n\nfrom pkg.mod import answer\n\n\n"
        "class TestPlain:\n    def test_m(self):\n        assert answer() == 42\n\n\n"
        "class TestCase(unittest.TestCase):\n"
        "    def setUp(self):\n        self.want = 0\n\n"
        "    def test_u(self):\n        self.assertEqual(answer(), self.want)\n\n\n"
        "@pytest.fixture\ndef want():\n    return 42\n\n\n"
        "def test_fixture(want):\n    assert answer() == want\n\n\n"
        "@pytest.mark.parametrize('n', [42])\ndef test_param(n):\n    assert answer() == n\n"
    )
    work = _project(tmp_path, _HONEST, test)
    ids = [
        "test_x.py::TestPlain::test_m",
        "test_x.py::TestCase::test_u",
        "test_x.py::test_fixture",
        "test_x.py::test_param[42]",
    ]
    facts = _plain(work, ids)
    assert facts["passing"] == ["test_x.py::TestPlain::test_m"]
    # unittest's set-up ran: the test's own assertion failed, as it would under pytest
    assert facts["failing"] == ["test_x.py::TestCase::test_u"]
    assert facts["skipped"] == 2 and facts["consistent"]
    assert "fixtures" in (tmp_path.parent / f"{tmp_path.name}-plain.xml").read_text()


def test_a_test_module_that_does_not_import_fails(tmp_path: Path) -> None:
    work = _project(
        tmp_path, _HONEST, "import pytest_only_helper\n\n\ndef test_answer():\n    pass\n"
    )
    facts = _plain(work, ["test_x.py::test_answer"])
    assert facts["failing"] == ["test_x.py::test_answer"]
    assert "ModuleNotFoundError" in facts["feedback"]


def test_the_runner_sits_beside_the_outcome_plugin() -> None:
    assert (PLUGIN_DIR / "looprun_plain.py").is_file()


def test_changed_lines_from_a_patch() -> None:
    patch = (
        "diff --git a/pkg/mod.py b/pkg/mod.py\n--- a/pkg/mod.py\n+++ b/pkg/mod.py\n"
        "@@ -3,0 +4,2 @@\n+a\n+b\n@@ -10 +12,0 @@\n-gone\n"
        "diff --git a/new.py b/new.py\n--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+x\n"
    )
    assert changed_lines(patch) == {"pkg/mod.py": [[4, 5], [12, 12]], "new.py": [[1, 1]]}


def test_the_pinned_rootdir_and_pythonpath_are_used(tmp_path: Path) -> None:
    """A src layout: the package is importable only through the base's `pythonpath`, and
    the ids are relative to the rootdir looprun pins, as pytest's are."""
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "__init__.py").write_text("")
    (tmp_path / "src" / "pkg" / "mod.py").write_text(_HONEST)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(_TEST)
    report = tmp_path.parent / "src-plain.xml"
    ids = json.dumps(["tests/test_x.py::test_answer"])
    command = (
        f"{sys.executable} -P -m looprun_plain --junitxml={report} --ids='{ids}' "
        f"-c {tmp_path / 'pytest.ini'} --rootdir {tmp_path} --confcutdir {tmp_path} "
        f"-o 'pythonpath={tmp_path / 'src'} {PLUGIN_DIR}'"
    )
    facts = observe_command(
        "junit",
        workdir=tmp_path / "tests",
        command=command,
        file=report,
        options={"outcome_channel": "pytest"},
        timeout_s=120,
    ).to_facts()
    assert facts["passing"] == ["tests/test_x.py::test_answer"], facts["feedback"]
