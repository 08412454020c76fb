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

With ``LOOPRUN_EXERCISED=1`` each failure also says which of the project's own source
files its call phase ran a function from (``exercised``): a profile function, set only
while a test's body runs, notes the first few files under the working directory that are
not tests, not conftest.py and not installed packages, and is removed at the first one
outside the test's own top directory (surely no test helper). A "reproduction" that
fails on ``assert False`` without calling the code shows an empty list. Only Python
functions called on the test's own thread count: setup, fixtures, module-level imports
and C extensions do not.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import sys
from typing import Any

import pytest

try:  # pytest's private junitxml naming: an older or newer pytest may not have it
    from _pytest.junitxml import mangle_test_address as _mangle
except Exception:
    _mangle = None  # type: ignore[assignment]

_ENV = "LOOPRUN_OUTCOME_FD"
_EXERCISED_ENV = "LOOPRUN_EXERCISED"
_SAFEPATH_ENV = "LOOPRUN_SAFEPATH"
_MAX_FILES = 8  # files noted per test; the profile function is removed once it has them
_INSTALLED = ("site-packages", "dist-packages")
_out: Any = None
_ran = 0
_failed = 0
_watch = False
_root = ""
_test_globs: list[str] = ["test_*.py", "*_test.py"]
_sources: dict[str, str] = {}  # code file name -> its project path, or "" when it is not one
_test_file = ""
_test_top = ""  # the test file's top directory ("tests/"), "" for a test at the root
_touched: list[str] = []


# looprun started this interpreter in safe-path mode so that pytest could not be shadowed
# while it started; the processes the tests start get the environment they would have had
if os.environ.pop(_SAFEPATH_ENV, None) == "1":
    os.environ.pop("PYTHONSAFEPATH", None)


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
    if _mangle is None:
        return ["", nodeid]
    try:
        names = _mangle(nodeid)
        prefix = getattr(config.option, "junitprefix", None)
    except Exception:  # an older or newer pytest: the node id alone is still compared
        return ["", nodeid]
    if prefix:
        names.insert(0, prefix)
    return [".".join(names[:-1]), names[-1]]


def _project_source(filename: str) -> str:
    """``filename`` (a code object's) relative to the working directory when it is the
    project's own source: not a test module, a conftest.py, an installed package or a
    file under a dot-directory such as ``.venv``; else ''."""
    if filename.startswith("<"):
        return ""
    path = os.path.realpath(filename)
    if not path.startswith(_root):
        return ""
    rel = path[len(_root) :]
    parts = rel.split(os.sep)
    name = parts[-1]
    if any(p in _INSTALLED or p.startswith(".") for p in parts[:-1]) or name == "conftest.py":
        return ""
    if any(fnmatch.fnmatch(name, glob) for glob in _test_globs):
        return ""
    return "/".join(parts)


def _profile(frame: Any, event: str, arg: Any) -> None:
    if event != "call":
        return
    code = frame.f_code
    filename = code.co_filename
    source = _sources.get(filename)
    if source is None:
        source = _sources[filename] = _project_source(filename)
    # importing a module runs its body: that is loading the code, not exercising it
    if not source or source == _test_file or source in _touched or code.co_name == "<module>":
        return
    _touched.append(source)
    # a file outside the test's own top directory is surely not a test helper: enough
    if len(_touched) >= _MAX_FILES or not _test_top or not source.startswith(_test_top):
        sys.setprofile(None)


def pytest_configure(config: Any) -> None:
    global _out, _watch, _root, _test_globs
    fd = os.environ.get(_ENV, "")
    if not fd.isdigit():
        return
    try:
        _out = os.fdopen(int(fd), "w", encoding="utf-8", closefd=False)
    except OSError:
        return
    _watch = os.environ.get(_EXERCISED_ENV) == "1"
    _root = os.path.join(os.path.realpath(os.getcwd()), "")
    with contextlib.suppress(ValueError, TypeError):
        _test_globs = [str(g) for g in config.getini("python_files")] or _test_globs
    _send({"event": "start", "plugin": os.path.realpath(__file__)})


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_call(item: Any) -> Any:
    """Watch what the test's body calls (only with ``LOOPRUN_EXERCISED=1``)."""
    global _test_file, _test_top, _touched
    _touched = []
    if not _watch:
        yield
        return
    path = os.path.realpath(str(getattr(item, "path", "")))
    rel = path[len(_root) :].split(os.sep) if path.startswith(_root) else []
    _test_file = "/".join(rel)
    _test_top = rel[0] + "/" if len(rel) > 1 else ""
    previous = sys.getprofile()
    sys.setprofile(_profile)
    try:
        yield
    finally:
        sys.setprofile(previous)


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
        record = {
            "event": "failed",
            "id": item.nodeid,
            "when": call.when,
            "junit": _junit_key(item.nodeid, item.config),
        }
        if _watch and call.when == "call":
            record["exercised"] = list(_touched)
        _send(record)
    yield


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_sessionfinish(session: Any, exitstatus: Any) -> Any:
    _send({"event": "end", "ran": _ran, "failed": _failed, "testsfailed": session.testsfailed})
    yield
