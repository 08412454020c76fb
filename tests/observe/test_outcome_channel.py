"""The pytest outcome channel against real pytest runs whose conftest fakes the result.

Each project has one failing test; the conftest rewrites what pytest reports in a
different place. The channel (looprun's plugin writing to an inherited pipe) and the exit
code must show the disagreement as ``consistent: false``; an honest run agrees.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from looprun.checks.runner import observe_command

_TEST = "def test_ok():\n    assert True\n\n\ndef test_bug():\n    assert 1 == 2\n"
_CHEATS = {
    "junit rewritten at unconfigure": (
        "import re\n\n\ndef pytest_unconfigure(config):\n"
        "    path = config.option.xmlpath\n"
        "    text = re.sub(r'<failure.*?</failure>', '', open(path).read(), flags=re.S)\n"
        "    open(path, 'w').write(text)\n"
    ),
    "logreport hook flips the outcome": (
        "import pytest\n\n\n@pytest.hookimpl(tryfirst=True)\n"
        "def pytest_runtest_logreport(report):\n"
        "    if report.failed:\n        report.outcome = 'passed'\n"
    ),
    "exitstatus set to 0": "def pytest_sessionfinish(session):\n    session.exitstatus = 0\n",
}


def _observe(work: Path, channel: bool = True, *, exercised: bool = False) -> dict[str, Any]:
    """The facts of one real pytest run of ``work`` (with the outcome channel, and what
    each failing test ran when ``exercised``)."""
    report = work / "out" / "junit.xml"
    report.parent.mkdir(exist_ok=True)
    obs = observe_command(
        "junit",
        workdir=work,
        command=f"{sys.executable} -m pytest -q -p no:cacheprovider "
        + ("-p looprun_outcome " if channel else "")
        + f"--junitxml={report}",
        file=report,
        options=({"outcome_channel": "pytest", "exercised": exercised} if channel else {}),
        timeout_s=120,
    )
    return obs.to_facts()


def _project(tmp_path: Path, conftest: str = "") -> Path:
    (tmp_path / "test_x.py").write_text(_TEST)
    if conftest:
        (tmp_path / "conftest.py").write_text(conftest)
    return tmp_path


def test_an_honest_failing_run_is_consistent(tmp_path: Path) -> None:
    facts = _observe(_project(tmp_path))
    assert (facts["failed"], facts["consistent"], facts["tampering"]) == (1, True, "")
    assert facts["failing"] == ["test_x.py::test_bug"]


@pytest.mark.parametrize("cheat", sorted(_CHEATS))
def test_a_faked_result_is_inconsistent(tmp_path: Path, cheat: str) -> None:
    facts = _observe(_project(tmp_path, _CHEATS[cheat]))
    assert facts["ok"] is False and facts["consistent"] is False
    assert "test_x.py::test_bug" in facts["tampering"]
    assert "tampered with" in facts["feedback"]


def test_without_the_channel_an_exit_code_the_report_denies_is_still_not_ok(
    tmp_path: Path,
) -> None:
    work = _project(tmp_path, _CHEATS["junit rewritten at unconfigure"])
    facts = _observe(work, channel=False)
    assert (facts["failed"], facts["exit_code"], facts["ok"]) == (0, 1, False)


def test_a_plugin_shadowed_from_the_workdir_is_flagged(tmp_path: Path) -> None:
    work = _project(tmp_path)
    (work / "looprun_outcome.py").write_text("")  # `python -m` puts the workdir first
    facts = _observe(work)
    assert facts["consistent"] is False and "never reported" in facts["tampering"]


_EXERCISE = (
    "import json\n\nfrom helpers import fail\nfrom pkg import core\n\nEARLY = core.double(2)\n\n\n"
    "def test_calls_the_code():\n    assert core.double(2) == 5\n\n\n"
    "def test_assert_false():\n    assert False\n\n\n"
    "def test_reads_a_value_from_import_time():\n    assert EARLY == 5\n\n\n"
    "def test_only_a_helper_and_the_standard_library():\n"
    "    json.dumps({})\n    fail()\n\n\n"
    "def test_passes():\n    assert core.double(1) == 2\n"
)


def _exercise_project(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "core.py").write_text("def double(x):\n    return 2 * x\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "helpers.py").write_text("def fail():\n    assert False\n")
    (tmp_path / "tests" / "test_x.py").write_text(_EXERCISE)
    (tmp_path / "conftest.py").write_text(
        "import sys, os\nsys.path.insert(0, os.path.join(os.path.dirname(__file__), 'tests'))\n"
    )
    return tmp_path


def test_exercised_names_the_project_files_each_failing_body_ran(tmp_path: Path) -> None:
    work = _exercise_project(tmp_path)
    facts = _observe(work, exercised=True)
    assert facts["consistent"], facts["tampering"]
    # the helper under tests/ is named (the template's tests glob decides about it); the
    # test module, conftest.py, json and pytest are not; module-level calls do not count
    assert facts["exercised"] == {
        "tests/test_x.py::test_calls_the_code": ["pkg/core.py"],
        "tests/test_x.py::test_assert_false": [],
        "tests/test_x.py::test_reads_a_value_from_import_time": [],
        "tests/test_x.py::test_only_a_helper_and_the_standard_library": ["tests/helpers.py"],
    }


def test_exercised_is_not_watched_unless_the_observer_asks(tmp_path: Path) -> None:
    facts = _observe(_exercise_project(tmp_path))
    assert facts["failed"] == 4 and facts["exercised"] == {}


# each test calls the code under test, so every one exercised it; what differs is where
# its failure was raised
_SELF_RAISED = (
    "import pytest\n\nfrom helpers import check, fail\nfrom pkg import core\n\n\n"
    "def test_assert_on_the_result():\n    assert core.double(2) == 5\n\n\n"
    "def test_assert_on_a_local_from_the_code():\n"
    "    got = core.double(2)\n    twice = got + 0\n    assert twice == 5\n\n\n"
    "def test_raised_in_the_code():\n    core.boom()\n\n\n"
    "def test_did_not_raise():\n    with pytest.raises(KeyError):\n        core.double(2)\n\n\n"
    "def test_a_helper_checks_the_result():\n    check(core.double(2), 5)\n\n\n"
    "def test_raises_after_the_call():\n"
    "    core.double(2)\n    raise AssertionError('bug')\n\n\n"
    "def test_value_error_if_a_file_is_missing():\n"
    "    core.double(2)\n    if not __import__('os').path.exists('nope'):\n"
    "        raise ValueError('bug')\n\n\n"
    "def test_assert_on_constants():\n    core.double(2)\n    assert 1 == 2\n\n\n"
    "def test_assert_on_a_marker():\n"
    "    core.double(2)\n    assert getattr(core, 'FIXED', False)\n\n\n"
    "def test_fails_through_pytest():\n    core.double(2)\n    pytest.fail('bug')\n\n\n"
    "def test_a_helper_that_raises():\n    fail(core.double(2))\n\n\n"
    "def test_a_builtin_raises_on_its_own():\n    core.double(2)\n    int('bug')\n\n\n"
    "def test_changed_in_place():\n    xs = [2, 1]\n    core.sort_in_place(xs)\n"
    "    assert xs == [1, 2]\n\n\n"
    "def test_a_method_changes_its_object():\n    box = core.Box()\n    box.put(2)\n"
    "    assert box.items == [2, 2]\n\n\n"
    "def test_reads_the_codes_data():\n    core.double(2)\n    assert core.LIMIT == 3\n\n\n"
    "def test_through_a_library_object():\n    import fractions\n"
    "    core.double(2)\n    assert fractions.Fraction(1, 2) == 1\n"
)

# what both judges (the plugin's, and looprun's own) say of _SELF_RAISED's failures
SELF_RAISED_VERDICTS = {
    "test_raises_after_the_call": "tests/test_x.py:32: a `raise` statement in the test",
    "test_value_error_if_a_file_is_missing": (
        "tests/test_x.py:38: a `raise` statement in the test"
    ),
    "test_assert_on_constants": "tests/test_x.py:43: an `assert` on constants",
    "test_assert_on_a_marker": (
        "tests/test_x.py:48: the failing statement reads nothing the code returned"
    ),
    "test_fails_through_pytest": "tests/test_x.py:53: a `fail()` call in the test",
    "test_a_helper_that_raises": "tests/helpers.py:6: a `raise` statement in the test",
    "test_a_builtin_raises_on_its_own": (
        "tests/test_x.py:62: the failing statement reads nothing the code returned"
    ),
    # a standard-library call reads nothing of the code
    "test_through_a_library_object": (
        "tests/test_x.py:85: the failing statement reads nothing the code returned"
    ),
}


def test_self_raised_names_the_failures_the_test_raised_itself(tmp_path: Path) -> None:
    """A reproduction must fail in the code or on an assertion on what it returned."""
    work = _exercise_project(tmp_path)
    (work / "pkg" / "core.py").write_text(
        "LIMIT = 2\n\n\ndef double(x):\n    return 2 * x\n\n\ndef boom():\n"
        "    raise ValueError('bug')\n\n\ndef sort_in_place(xs):\n    xs.append(0)\n\n\n"
        "class Box:\n    def __init__(self):\n        self.items = []\n\n"
        "    def put(self, x):\n        self.items.append(x)\n"
    )
    (work / "tests" / "helpers.py").write_text(
        "def check(got, want):\n    assert got == want\n\n\n"
        "def fail(got):\n    raise AssertionError(got)\n"
    )
    (work / "tests" / "test_x.py").write_text(_SELF_RAISED)
    facts = _observe(work, exercised=True)
    assert facts["consistent"] and facts["failed"] == 16, facts
    said = {k.split("::")[1]: v for k, v in facts["self_raised"].items()}
    assert said == SELF_RAISED_VERDICTS
