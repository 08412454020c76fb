"""The python stack's listing of test ids against real pytest sessions.

The baseline compares the ids a collection-only session lists (``--collect-only``, told
over the outcome channel by looprun's plugin) with the ids a run's JUnit report gave, so
both must be spelled alike: classes, parameters with odd characters, doctests, the report
family that keeps a ``file`` attribute, a ``junit_prefix``. A list that cannot be read
whole is an error, never a shorter list.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from looprun.checks.runner import observe_command
from looprun.checks.stacks import get
from looprun.observe.base import Observation
from looprun.observe.outcome_channel import LISTED, Outcomes

_TESTS = """\
import pytest


class TestOuter:
    class TestInner:
        @pytest.mark.parametrize("x", [1, "a b", "::x", "a/b", "\\xe9", "\\n", None, 2.5, object()])
        def test_odd(self, x):
            pass

    def test_method(self):
        pass


@pytest.mark.parametrize("a,b", [("x", "y"), ("y", "x")], ids=["one.two", "three[4]"])
def test_ids(a, b):
    assert a != b


@pytest.mark.skip
def test_skipped():
    pass


@pytest.mark.xfail
def test_expected_to_fail():
    assert 0


def test_fails():
    assert 0
"""
_DOCTEST = 'def double(x):\n    """\n    >>> double(2)\n    4\n    """\n    return 2 * x\n'
_ONLY_LISTED = {"tests/test_a.py::test_skipped", "tests/test_a.py::test_expected_to_fail"}


def _project(root: Path, conftest: str = "") -> Path:
    (root / "tests" / "deep").mkdir(parents=True)
    (root / "tests" / "test_a.py").write_text(_TESTS)
    (root / "tests" / "deep" / "test_b.py").write_text("def test_b():\n    pass\n")
    (root / "tests" / "deep" / "helpers.py").write_text(_DOCTEST)
    if conftest:
        (root / "conftest.py").write_text(conftest)
    return root


def _observe(work: Path, extra: str = "", *, listing: bool) -> Observation:
    """One real pytest session on ``work`` as the python pack runs it, listing the tests
    with the stack's words when ``listing``."""
    report = work.parent / f"{work.name}-junit.xml"
    words = " ".join(get("python").listing or ()) if listing else ""
    return observe_command(
        "junit",
        workdir=work,
        command=f"{sys.executable} -m pytest -q -p no:cacheprovider -p looprun_outcome "
        f"--junitxml={report} {extra} {words}",
        file=report,
        options={"outcome_channel": "pytest", **({LISTED: True} if listing else {})},
        timeout_s=120,
    )


@pytest.mark.parametrize(
    "extra",
    [
        "",
        "-v",
        "--doctest-modules",
        "-o junit_family=xunit1 --junitprefix=pre",
        "-o junit_family=legacy",
    ],
)
def test_a_list_names_every_id_a_run_reports_alike(tmp_path: Path, extra: str) -> None:
    work = _project(tmp_path / "p")
    ran = _observe(work, extra, listing=False).to_facts()
    listed = _observe(work, extra, listing=True)
    assert listed.error is None, listed.error
    reported = set(ran["passing"]) | set(ran["failing"])
    names = set(listed.facts[LISTED])
    assert len(reported) >= 14 and reported <= names
    assert names - reported == _ONLY_LISTED  # skipped, or xfailed: in no run's ids
    if extra == "--doctest-modules":
        assert "tests/deep/helpers.py::helpers.double" in names


_BROKEN = {
    # a test file that cannot be imported: pytest stops at collection (exit 2)
    "collection error": ("", "tests/test_broken.py", "def test_x(:\n"),
    # the same, but the session goes on and exits 0 with the error in its report
    "collection error, continued": (
        "--continue-on-collection-errors",
        "tests/test_broken.py",
        "import no_such_module_here\n",
    ),
    # the session leaves before looprun's plugin has sent the list
    "exits early": (
        "",
        "conftest.py",
        "import os\n\n\ndef pytest_collection_finish(session):\n    os._exit(0)\n",
    ),
    # a conftest adds a well-formed record of its own: the count no longer holds
    "a record added": (
        "",
        "conftest.py",
        "import json, os\n\n\ndef pytest_collection_finish(session):\n"
        "    fd = int(os.environ['LOOPRUN_OUTCOME_FD'])\n"
        "    record = {'event': 'collected', 'junit': ['tests.test_a', 'test_ghost']}\n"
        "    os.write(fd, (json.dumps(record) + '\\n').encode())\n",
    ),
    # or a line that is not the plugin's
    "a line added": (
        "",
        "conftest.py",
        "import os\n\n\ndef pytest_collection_finish(session):\n"
        "    os.write(int(os.environ['LOOPRUN_OUTCOME_FD']), b'not json\\n')\n",
    ),
}


@pytest.mark.parametrize("case", sorted(_BROKEN))
def test_a_list_that_cannot_be_read_whole_is_an_error(tmp_path: Path, case: str) -> None:
    extra, path, text = _BROKEN[case]
    work = _project(tmp_path / "p")
    (work / path).write_text(text)
    listed = _observe(work, extra, listing=True)
    assert listed.error and not listed.ok, listed
    assert LISTED not in listed.facts


def test_a_run_that_lists_nothing_gives_no_ids_to_a_run_s_parse(tmp_path: Path) -> None:
    """Without the engine's option the parser reads a run, whatever the channel says: a
    template cannot turn a list of tests into passes."""
    work = _project(tmp_path / "p")
    report = tmp_path / "junit.xml"
    obs = observe_command(
        "junit",
        workdir=work,
        command=f"{sys.executable} -m pytest -q -p no:cacheprovider -p looprun_outcome "
        f"--junitxml={report} --collect-only",
        file=report,
        options={"outcome_channel": "pytest"},
        timeout_s=120,
    )
    assert obs.facts["passing"] == () and not obs.ok and LISTED not in obs.facts


def test_the_count_closes_the_list_once() -> None:
    said = Outcomes()
    said.feed(b'{"event": "collected", "junit": ["t", "test_a"], "file": null}')
    said.feed(b'{"event": "listed", "count": 1}')
    assert (said.collected, said.listed) == ([("t", "test_a", None)], 1)
    said.feed(b'{"event": "listed", "count": 1}')  # said twice: no count holds
    assert said.listed == -1
    said.feed(b'{"event": "collected", "junit": "t::test_b"}')
    assert said.malformed == 1
