"""A pytest plugin that tells looprun each test's outcome over an inherited pipe.

It is loaded into the test command with ``-p looprun_outcome`` from a directory looprun
ships (outside the workdir) and writes JSON lines to the file descriptor named by
``LOOPRUN_OUTCOME_FD``. looprun compares what it says with the JUnit report and the exit
code, so a report rewritten after pytest wrote it, a report hook that turns a failure into
a pass, or an edited ``session.exitstatus`` shows as a disagreement.

Each outcome is taken from ``call.excinfo`` in the outermost ``pytest_runtest_makereport``
wrapper, before any other implementation of the hook sees the report, and is written at
once. Code in the same interpreter can still reach this channel; it raises the bar, it is
not a wall. The file imports nothing but the standard library and pytest, so it runs in
whatever interpreter the project's tests use.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

_ENV = "LOOPRUN_OUTCOME_FD"
_out: Any = None
_ran = 0
_failed = 0


def _send(record: dict[str, Any]) -> None:
    global _out
    if _out is None:
        return
    try:
        _out.write(json.dumps(record) + "\n")
        _out.flush()
    except (OSError, ValueError):
        _out = None  # the pipe was closed: looprun notices that the channel ended early


def _junit_key(nodeid: str, config: Any) -> list[str]:
    """The (classname, name) pytest's junitxml writes for this node id."""
    try:
        from _pytest.junitxml import mangle_test_address

        names = mangle_test_address(nodeid)
        prefix = getattr(config.option, "junitprefix", None)
    except Exception:  # an older or newer pytest: the node id alone is still compared
        return ["", nodeid]
    if prefix:
        names.insert(0, prefix)
    return [".".join(names[:-1]), names[-1]]


def pytest_configure(config: Any) -> None:
    global _out
    fd = os.environ.get(_ENV, "")
    if not fd.isdigit():
        return
    try:
        _out = os.fdopen(int(fd), "w", encoding="utf-8", closefd=False)
    except OSError:
        return
    _send({"event": "start", "plugin": os.path.realpath(__file__)})


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Any:
    global _ran, _failed
    excinfo = call.excinfo
    if call.when == "call":
        _ran += 1
    expected = excinfo is None or excinfo.errisinstance(
        (pytest.skip.Exception, pytest.xfail.Exception)
    )
    if not expected and item.get_closest_marker("xfail") is None:
        _failed += 1
        _send(
            {
                "event": "failed",
                "id": item.nodeid,
                "when": call.when,
                "junit": _junit_key(item.nodeid, item.config),
            }
        )
    yield


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_sessionfinish(session: Any, exitstatus: Any) -> Any:
    _send({"event": "end", "ran": _ran, "failed": _failed, "testsfailed": session.testsfailed})
    yield
