"""Run a few pytest tests again in a plain interpreter, without pytest, and say which fail.

Code that behaves differently under a test run (``"pytest" in sys.modules`` spelled any
way, a ``PYTEST_*``, ``LOOPRUN_*`` or ``CI`` variable, ``sys.argv``, its callers' frames)
passes under pytest and fails here: looprun runs the tests that reproduce a bug once more
this way after they pass. Each test function is imported from its file and called
directly, with no ``pytest`` or ``_pytest`` module loaded, those variables unset and
``sys.argv`` as ``python -c`` leaves it.

Once a test passes, it runs again with a profile function noting the comparison and
truth methods (``__eq__``, ``__ne__``, ``__lt__`` ..., ``__contains__``, ``__bool__``,
``__len__``, ``__instancecheck__``) of the project's own code it calls on lines the run
changed (``--changed``: file -> line ranges, from looprun's diff). Each is then asked about
objects nothing can equal or contain: one that says yes (an ``__eq__`` true for a bare
``object()``) made the test pass by saying yes to anything, and the test is reported
failing. A comparison method the run wrote honestly (value equality) answers no and
counts; ``__bool__`` and ``__len__`` cannot be asked this way, so a pass through one the
run wrote does not count. Methods on lines the run did not change are never judged.

Covered: test functions and methods of plain test classes that take no arguments, and
``unittest.TestCase`` methods. Not covered (reported skipped): tests that use fixtures or
are parametrized, async tests, and a conftest.py's set-up. The outcome goes to looprun's
channel (``LOOPRUN_OUTCOME_FD``, read before any test code is imported) and to a JUnit
report. Only the standard library is imported, before the project's directory is put on
``sys.path``.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import shlex
import sys
import threading
import traceback
import types
import unittest
from typing import Any
from xml.sax.saxutils import quoteattr

_DUNDERS = frozenset(
    {
        "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__bool__", "__len__",
        "__contains__", "__instancecheck__", "__subclasscheck__",
    }
)  # fmt: skip
_INSTALLED = ("site-packages", "dist-packages")
_TRACES = ("PYTEST_", "LOOPRUN_", "_PYTEST")
_HERE = os.path.dirname(os.path.realpath(__file__))


def _scrub() -> None:
    """Remove what tells a test run from a plain one: variables, modules, argv, path."""
    for name in list(os.environ):
        if name.startswith(_TRACES) or name in ("CI", "PYTHONSAFEPATH"):
            del os.environ[name]
    path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    path = [p for p in path if os.path.realpath(p) != _HERE]
    if path:
        os.environ["PYTHONPATH"] = os.pathsep.join(path)
    else:
        os.environ.pop("PYTHONPATH", None)
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != _HERE]
    for name in list(sys.modules):
        if name.split(".")[0] in ("pytest", "_pytest", "pluggy", "looprun_outcome"):
            del sys.modules[name]
    sys.argv[:] = ["-c"]
    # as under `python -c`: a __main__ without this file's name, spec or loader
    sys.modules["__main__"] = types.ModuleType("__main__")


def _module_name(path: str) -> tuple[str, str]:
    """pytest's ``prepend`` import: the first directory up without ``__init__.py`` goes on
    ``sys.path``, the module is named by the packages below it."""
    directory, name = os.path.split(os.path.abspath(path))
    parts = [os.path.splitext(name)[0]]
    while os.path.isfile(os.path.join(directory, "__init__.py")):
        directory, package = os.path.split(directory)
        parts.insert(0, package)
    return directory, ".".join(parts)


def _project_file(filename: str, root: str, tests: set[str]) -> str:
    """``filename`` relative to ``root`` when it is the project's code, not a test: ''."""
    if filename.startswith("<"):
        return ""
    path = os.path.realpath(filename)
    if not path.startswith(root):
        return ""
    rel = path[len(root) :]
    parts = rel.split(os.sep)
    if any(p in _INSTALLED or p.startswith(".") for p in parts[:-1]):
        return ""
    rel = "/".join(parts)
    return "" if rel in tests or parts[-1] == "conftest.py" else rel


def _lines(code: Any) -> set[int]:
    found = {code.co_firstlineno}
    for _, _, line in code.co_lines():
        if line is not None:
            found.add(line)
    return found


class _Probe:
    """An object no honest comparison method calls equal, or finds in a container."""

    def __repr__(self) -> str:
        return "<probe>"


# how each method answers a probe when it says yes to anything
_ANYTHING: dict[str, Any] = {
    "__eq__": True,
    "__ne__": False,
    "__lt__": True,
    "__le__": True,
    "__gt__": True,
    "__ge__": True,
    "__contains__": True,
    "__instancecheck__": True,
    "__subclasscheck__": True,
}
_MAX_OBJECTS = 4  # receivers kept per method for the probe


def _says_yes_to_anything(name: str, receivers: list[Any]) -> bool:
    """Whether ``name`` of any of ``receivers`` answers a probe as if everything matched
    (an ``__eq__`` true for an object nothing can equal); methods that cannot be probed
    this way (``__bool__``, ``__len__``) count as saying yes."""
    if name not in _ANYTHING:
        return True
    probes: tuple[Any, ...] = (object(), _Probe(), "\x00looprun-probe\x00")
    if name == "__subclasscheck__":
        probes = (_Probe, type("Probe", (), {}))
    for receiver in receivers:
        for probe in probes:
            try:
                said = getattr(receiver, name)(probe)
            except Exception:
                continue
            if said is not NotImplemented and bool(said) is _ANYTHING[name]:
                return True
    return False


class _Watch:
    """A profile function noting the project's comparison and truth methods a test calls
    on lines the run changed, with the objects they were called on."""

    def __init__(self, root: str, tests: set[str], changed: dict[str, list[list[int]]]):
        self.root, self.tests, self.changed = root, tests, changed
        self.files: dict[str, str] = {}
        self.seen: dict[Any, str] = {}  # code -> "" (not changed by the run) or its message
        self.hits: dict[Any, list[Any]] = {}  # code -> the objects it was called on

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event != "call" or frame.f_code.co_name not in _DUNDERS:
            return
        code = frame.f_code
        said = self.seen.get(code)
        if said is None:
            said = self.seen[code] = self._judge(code)
        if said:
            receivers = self.hits.setdefault(code, [])
            if code.co_argcount and len(receivers) < _MAX_OBJECTS:
                receivers.append(frame.f_locals.get(code.co_varnames[0]))

    def flagged(self) -> list[str]:
        """The methods the test passed through that say yes to anything."""
        return [
            self.seen[code]
            for code, receivers in self.hits.items()
            if _says_yes_to_anything(code.co_name, receivers)
        ]

    def _judge(self, code: Any) -> str:
        name = code.co_filename
        rel = self.files.get(name)
        if rel is None:
            rel = self.files[name] = _project_file(name, self.root, self.tests)
        ranges = self.changed.get(rel) if rel else None
        if not ranges:
            return ""
        lines = _lines(code)
        if not any(start <= n <= end for start, end in ranges for n in lines):
            return ""
        qualname = getattr(code, "co_qualname", code.co_name)
        return f"`{qualname}` defined in {rel}:{code.co_firstlineno}"


def _target(module: Any, parts: list[str]) -> tuple[Any, str]:
    """The callable a node id names (``Class::method`` or ``function``), or why it is not
    run here."""
    if any("[" in p for p in parts):
        return None, "parametrized"
    obj: Any = module
    owner: Any = None
    for part in parts:
        owner, obj = obj, getattr(obj, part)
    if inspect.isclass(owner):
        if issubclass(owner, unittest.TestCase):
            return owner(parts[-1]).debug, ""
        if any(hasattr(owner, f) for f in ("setup_method", "setup_class", "setup")):
            return None, "set-up methods"
        obj = getattr(owner(), parts[-1])
    if inspect.iscoroutinefunction(obj):
        return None, "async"
    if inspect.signature(obj).parameters:
        return None, "fixtures"
    return obj, ""


# Each test is called on a thread of its own through this function, compiled as
# ``python -c`` code is: the test's callers are the thread's start and ``<string>``, never
# this runner's frames
_CALL = compile(
    "def call(target, watch, box):\n"
    "    import sys\n"
    "    sys.setprofile(watch)\n"
    "    try:\n"
    "        target()\n"
    "    except BaseException as exc:\n"
    "        box.append(exc)\n"
    "    finally:\n"
    "        sys.setprofile(None)\n",
    "<string>",
    "exec",
)


def _call(target: Any, watch: _Watch | None) -> BaseException | None:
    """Run ``target`` on a new thread (with ``watch`` as its profile function); what it
    raised, if anything."""
    scope: dict[str, Any] = {}
    exec(_CALL, scope)
    box: list[BaseException] = []
    thread = threading.Thread(target=scope["call"], args=(target, watch, box), name="Thread-1")
    thread.start()
    thread.join()
    return box[0] if box else None


def _run(node: str, root: str, tests: set[str], watch: _Watch) -> tuple[str, str, list[str]]:
    """(outcome, message, junit key) of one test id: passed, failed or skipped. A test is
    run with nothing watching it first; once that passes, again with ``watch`` noting the
    comparison methods it calls (a test that fails only while watched fails)."""
    file, *parts = node.split("::")
    where, name = _module_name(os.path.join(root, file))
    if where not in sys.path:
        sys.path.insert(0, where)
    key = [".".join([name, *parts[:-1]]), parts[-1] if parts else node]
    watch.hits = {}
    for watching in (None, watch):
        try:
            module = importlib.import_module(name)
            call, skip = _target(module, parts)
        except Exception as exc:
            return "failed", _failure(exc, root), key
        if call is None:
            return "skipped", f"not run without pytest ({skip})", key
        raised = _call(call, watching)
        if isinstance(raised, unittest.SkipTest):
            return "skipped", f"skipped: {raised}", key
        if raised is not None:
            return "failed", _failure(raised, root), key
    flagged = watch.flagged()
    if flagged:
        which = ", ".join(flagged[:3])
        return "failed", f"passed only through {which}, which this run changed", key
    return "passed", "", key


def _failure(exc: BaseException, root: str) -> str:
    """What failed, headline last: the traceback's tail, then the exception and, for a
    bare ``assert`` (not rewritten by pytest here), the line that failed."""
    tail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    # frames in the check's own tree are named as the repository names them: that tree's
    # place means nothing to the model and is not the user's to read in feedback
    text = tail.replace(f'File "{root}', 'File "').strip().splitlines()[-12:]
    head = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    frames = traceback.extract_tb(exc.__traceback__)
    if frames and not str(exc):
        last = frames[-1]
        where = last.filename[len(root) :] if last.filename.startswith(root) else last.filename
        head += f" at {where}:{last.lineno}: {(last.line or '').strip()}"
    return "\n".join([*text[:-1], head])


def _junit(results: list[tuple[str, str, str, list[str]]], file_of: dict[str, str]) -> str:
    cases = []
    for node, outcome, message, (classname, name) in results:
        attrs = (
            f"classname={quoteattr(classname)} name={quoteattr(name)} "
            f"file={quoteattr(file_of[node])}"
        )
        if outcome == "passed":
            cases.append(f"<testcase {attrs}/>")
        else:
            tag = "failure" if outcome == "failed" else "skipped"
            head = message.splitlines()[-1] if message else outcome
            body = (
                f"<{tag} message={quoteattr(head)}>{_text(message)}</{tag}>"
                if tag == "failure"
                else f"<skipped message={quoteattr(head)}/>"
            )
            cases.append(f"<testcase {attrs}>{body}</testcase>")
    failed = sum(1 for r in results if r[1] == "failed")
    skipped = sum(1 for r in results if r[1] == "skipped")
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n<testsuites><testsuite name="plain" '
        f'tests="{len(results)}" failures="{failed}" errors="0" skipped="{skipped}">'
        + "".join(cases)
        + "</testsuite></testsuites>\n"
    )


def _text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="looprun_plain")
    parser.add_argument("--junitxml", required=True)
    parser.add_argument("--changed", default="{}", help="JSON: file -> [[first, last], ...]")
    parser.add_argument("--ids", required=True, help="JSON list of pytest node ids")
    # what looprun appends to pin pytest's configuration: the rootdir the ids are relative
    # to and the base's `pythonpath` (as absolute directories); the rest means nothing here
    parser.add_argument("-c", dest="config", default="")
    parser.add_argument("--rootdir", default="")
    parser.add_argument("--confcutdir", default="")
    parser.add_argument("-o", dest="overrides", action="append", default=[])
    args = parser.parse_args(argv)
    ids = [str(i) for i in json.loads(args.ids)]
    changed = {
        str(f): [[int(a), int(b)] for a, b in r] for f, r in json.loads(args.changed).items()
    }
    pythonpath: list[str] = []
    for override in args.overrides:
        name, _, value = override.partition("=")
        if name.strip() == "pythonpath":
            pythonpath = shlex.split(value)
    fd = os.environ.get("LOOPRUN_OUTCOME_FD", "")
    out = os.fdopen(int(fd), "w", encoding="utf-8", closefd=False) if fd.isdigit() else None
    report = os.path.abspath(args.junitxml)

    def send(record: dict[str, Any]) -> None:
        if out is not None:
            out.write(json.dumps(record) + "\n")
            out.flush()

    send({"event": "start", "plugin": os.path.realpath(__file__)})
    root = os.path.join(os.path.realpath(args.rootdir or os.getcwd()), "")
    tests = {i.split("::")[0] for i in ids}
    _scrub()
    # the base's `pythonpath`, then the working directory, as pytest puts them (never
    # this runner's own directory)
    sys.path[:0] = [os.path.abspath(p) for p in pythonpath if os.path.realpath(p) != _HERE]
    watch = _Watch(root, tests, changed)
    results = []
    file_of = {}
    for node in ids:
        outcome, message, key = _run(node, root, tests, watch)
        file_of[node] = node.split("::")[0]
        results.append((node, outcome, message, key))
        if outcome == "failed":
            send({"event": "failed", "id": node, "when": "call", "junit": key})
    failed = sum(1 for r in results if r[1] == "failed")
    with open(report, "w", encoding="utf-8") as fh:
        fh.write(_junit(results, file_of))
    send({"event": "end", "ran": len(results), "failed": failed, "testsfailed": failed})
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
