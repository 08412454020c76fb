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

With it each failure also says where it was raised (``self_raised``): nothing when a
frame of the project's code is in its traceback (the code raised it, or something the
code called did), or when the failing statement in the test (or a test helper, or the
test line that called that helper) reads what the code gave: it calls anything but a
builtin or the standard library, names a project function, reads a project module's
attribute, or reads a name holding what the code gave (bound from such a call, handed to
one, a fixture holding a project object). Otherwise a short reason: a ``raise`` statement
or a ``fail()`` call in the test, an ``assert`` on constants, or a statement that reads
nothing the code returned - a test that calls the code and then fails on its own. The
statement is read with ``ast`` from the test's source and the names resolved in the
failing frame without calling anything.

Under ``--collect-only`` it lists every test the session would run, each under the name
the JUnit report gives it, so the baseline can tell which parametrized ids move between
two processes from a collection instead of a second run of the tests.
"""

from __future__ import annotations

import ast
import contextlib
import fnmatch
import functools
import inspect
import json
import os
import sys
import types
from typing import Any

import pytest
from looprun_statements import judged, raises_itself

try:  # pytest's private junitxml naming: an older or newer pytest may not have it
    from _pytest.junitxml import mangle_test_address as _mangle
except Exception:
    _mangle = None  # type: ignore[assignment]
try:  # and how it writes a name into the report
    from _pytest.junitxml import bin_xml_escape as _xml_escape
except Exception:
    _xml_escape = None  # type: ignore[assignment]

_ENV = "LOOPRUN_OUTCOME_FD"
_EXERCISED_ENV = "LOOPRUN_EXERCISED"
_SAFEPATH_ENV = "LOOPRUN_SAFEPATH"
_MAX_FILES = 8  # files noted per test; the profile function is removed once it has them
_INSTALLED = ("site-packages", "dist-packages")
# a file under one of these is a test helper, not the code under test, where it raises
_TEST_DIRS = frozenset({"tests", "test", "testing"})
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


def _listed(item: Any) -> dict[str, Any] | None:
    """A collected test as the JUnit report would name it: the key of ``_junit_key`` with
    the name escaped as pytest writes it, and its file where the report family keeps one
    (``xunit1``); None when pytest's naming cannot be had (then nothing is listed)."""
    if _mangle is None or _xml_escape is None:
        return None
    try:
        classname, name = _junit_key(item.nodeid, item.config)
        family = str(item.config.getini("junit_family"))
        where = item.location[0] if family in ("xunit1", "legacy") else None
        return {"event": "collected", "junit": [classname, _xml_escape(name)], "file": where}
    except Exception:
        return None


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: Any) -> None:
    """With ``--collect-only``, every test the session would run, then how many: looprun
    learns which ids a run names without running one. The count closes the list, so one
    cut short or spoken over is never read as whole."""
    if _out is None or not session.config.option.collectonly:
        return
    records = [r for item in session.items if (r := _listed(item)) is not None]
    if len(records) != len(session.items):
        return  # a list with holes is no list: nothing is said, and a run tells instead
    for record in records:
        _send(record)
    _send({"event": "listed", "count": len(records)})


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
            try:
                why = _self_raised(excinfo.tb)
            except Exception:  # never let the judgement break the report: it says nothing
                why = ""
            if why:
                record["self_raised"] = why
        _send(record)
    yield


def _local(filename: str) -> bool:
    """Whether a code object's file is under the working directory, outside installed
    packages and dot-directories: the project's code or its tests."""
    if filename.startswith("<") or not _root:
        return False
    path = os.path.realpath(filename)
    if not path.startswith(_root):
        return False
    parts = path[len(_root) :].split(os.sep)
    return not any(p in _INSTALLED or p.startswith(".") for p in parts[:-1])


_trees: dict[str, Any] = {}


def _tree(filename: str) -> Any:
    if filename not in _trees:
        try:
            with open(filename, encoding="utf-8") as fh:
                _trees[filename] = ast.parse(fh.read())
        except (OSError, SyntaxError, ValueError):
            _trees[filename] = None
    return _trees[filename]


def _at(tree: Any, line: int) -> tuple[Any, Any]:
    """The innermost statement spanning ``line`` and the function holding it."""
    stmt = func = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt):
            continue
        end = getattr(node, "end_lineno", None) or node.lineno
        if not node.lineno <= line <= end:
            continue
        is_func = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        if is_func and (func is None or node.lineno >= func.lineno):
            func = node
        if stmt is None or (node.lineno, -end) >= (stmt.lineno, -(stmt.end_lineno or 0)):
            stmt = node
    return stmt, func


def _resolve(node: Any, frame: Any) -> Any:
    """The value a name or attribute chain has in ``frame``, read without running any
    code (``inspect.getattr_static``); ``_resolve`` raises LookupError when it cannot."""
    if isinstance(node, ast.Name):
        for scope in (frame.f_locals, frame.f_globals, frame.f_builtins):
            if node.id in scope:
                return scope[node.id]
        raise LookupError(node.id)
    if isinstance(node, ast.Attribute):
        try:
            return inspect.getattr_static(_resolve(node.value, frame), node.attr)
        except AttributeError:
            raise LookupError(node.attr) from None
    raise LookupError(type(node).__name__)


def _callee(value: Any) -> Any:
    """The function or class a call of ``value`` runs first (methods and partials
    unwrapped), read without running any of its code."""
    for _ in range(8):
        if isinstance(value, (types.MethodType, staticmethod, classmethod)):
            value = value.__func__
        elif isinstance(value, functools.partial):
            value = value.func
        else:
            break
    return value


def _runs_local_code(value: Any, depth: int = 0) -> bool:
    """Whether calling ``value`` runs a function defined under the working directory."""
    value = _callee(value)
    if isinstance(value, types.FunctionType):
        if _local(value.__code__.co_filename):
            return True
    elif isinstance(value, type):
        module = sys.modules.get(value.__dict__.get("__module__") or "")
        return _local(getattr(module, "__file__", None) or "<none>")
    elif not isinstance(value, _BUILTIN_CALLABLES) and _runs_local_code(type(value), depth):
        return True  # an instance whose class is the project's (its __call__)
    wrapped = inspect.getattr_static(value, "__wrapped__", None)  # a decorator's wrapper
    return wrapped is not None and depth < 8 and _runs_local_code(wrapped, depth + 1)


_BUILTIN_CALLABLES = (
    types.BuiltinFunctionType,
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
    types.MethodWrapperType,
    types.ClassMethodDescriptorType,
)
_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | {"builtins"}
_STDLIB_DIR = os.path.join(os.path.realpath(os.path.dirname(os.__file__)), "")


def _module_of(value: Any) -> str:
    """The name of the module ``value`` (a callable) was defined in, '' when unknown."""
    value = _callee(value)
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType)):
        module = value.__module__
        if module is None and isinstance(value, types.BuiltinFunctionType):
            owner = value.__self__  # a builtin bound method: its object's type's module
            module = (owner if isinstance(owner, type) else type(owner)).__module__
    elif isinstance(value, type):
        module = value.__module__
    elif isinstance(value, _BUILTIN_CALLABLES):
        owner = getattr(value, "__objclass__", None) or type(getattr(value, "__self__", None))
        module = owner.__module__ if isinstance(owner, type) else None
    else:
        module = type(value).__module__
    return module if isinstance(module, str) else ""


def _standard(value: Any) -> bool:
    """Whether ``value`` is a builtin or a standard-library callable: calling it runs none
    of the project's code (a library's may: a web framework's test client)."""
    module = _module_of(value)
    if not module:
        return False
    if module.split(".")[0] in _STDLIB or module in sys.builtin_module_names:
        return True
    path = os.path.realpath(getattr(sys.modules.get(module), "__file__", None) or "/")
    return path.startswith(_STDLIB_DIR) and not any(p in path for p in _INSTALLED)


def _project_module(value: Any) -> bool:
    return inspect.ismodule(value) and _local(getattr(value, "__file__", None) or "<none>")


def _reads_the_code(node: Any, frame: Any, tainted: set[str]) -> bool:
    """Whether evaluating ``node`` may read what the code does: it calls anything but a
    builtin or the standard library, names a function defined under the working directory
    (``map(f, xs)``, ``pytest.raises(E, f)``), reads a project module's attribute, or
    reads a name the test bound to such a result."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in tainted:
            return True
        if isinstance(sub, ast.Call):
            try:
                if not _standard(_resolve(sub.func, frame)):
                    return True
            except LookupError:  # a call on something computed: cannot tell
                return True
        elif isinstance(sub, (ast.Name, ast.Attribute)):
            try:
                value = _resolve(sub, frame)
                owner = _resolve(sub.value, frame) if isinstance(sub, ast.Attribute) else None
            except LookupError:
                continue
            if callable(value) and _runs_local_code(value):
                return True
            if _project_module(owner) and not inspect.ismodule(value):
                return True
    return False


def _root_name(node: Any) -> str:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


def _tainted(func: Any, frame: Any) -> set[str]:
    """The names in ``func`` that hold what the code gave: bound from an expression that
    reads it, passed to a call of the code's own functions or the object such a method was
    called on (the code may change them in place), and the test's parameters (fixtures)
    holding an instance of a class defined under the working directory; followed until
    nothing changes."""
    names: set[str] = set()
    args = func.args
    for arg in [*getattr(args, "posonlyargs", []), *args.args, *args.kwonlyargs]:
        if arg.arg in frame.f_locals and _runs_local_code(type(frame.f_locals[arg.arg])):
            names.add(arg.arg)
    binds = []
    for node in ast.walk(func):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            binds.append((targets, node.value))
        elif isinstance(node, ast.NamedExpr):
            binds.append(([node.target], node.value))
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            binds.append(([node.target], node.iter))
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            binds += [([i.optional_vars], i.context_expr) for i in node.items if i.optional_vars]
        elif isinstance(node, ast.Call):
            try:
                code = _runs_local_code(_resolve(node.func, frame))
            except LookupError:
                code = False
            if code:
                handed = [node.func.value] if isinstance(node.func, ast.Attribute) else []
                handed += [*node.args, *(k.value for k in node.keywords)]
                for name in filter(None, map(_root_name, handed)):
                    held = frame.f_locals.get(name, frame.f_globals.get(name))
                    if not inspect.ismodule(held) and not isinstance(held, type):
                        names.add(name)  # an object, never the module a function is in
    for _ in range(8):
        before = len(names)
        for targets, value in binds:
            if _reads_the_code(value, frame, names):
                for target in targets:
                    names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        if len(names) == before:
            break
    return names


def _self_raised(tb: Any) -> str:
    """Why the failure whose traceback is ``tb`` was raised by the test itself rather
    than by the code under test or an assertion on what it gave; '' when it was not."""
    local = []  # (filename, line, frame) of the test's own frames, outermost first
    while tb is not None:
        frame = tb.tb_frame
        filename = frame.f_code.co_filename
        if _local(filename):
            source = _sources.get(filename)
            if source is None:
                source = _sources[filename] = _project_source(filename)
            if (
                source
                and source != _test_file
                and not _TEST_DIRS.intersection(source.split("/")[:-1])
            ):
                return ""  # raised in the project's code, or below it
            local.append((filename, tb.tb_lineno, frame))
        tb = tb.tb_next
    first, said = True, ""
    for filename, line, frame in reversed(local):
        tree = _tree(filename)
        stmt, func = _at(tree, line) if tree is not None else (None, None)
        if stmt is None:
            return ""  # cannot tell
        if first:
            why = raises_itself(stmt)
            if why:
                return f"{_rel(filename)}:{line}: {why}"
        tainted = _tainted(func, frame) if func is not None else set()
        if _reads_the_code(judged(stmt), frame, tainted):
            return ""
        if first:
            said = f"{_rel(filename)}:{line}: the failing statement reads nothing the code returned"
        first = False
    return said


def _rel(filename: str) -> str:
    path = os.path.realpath(filename)
    return "/".join(path[len(_root) :].split(os.sep)) if path.startswith(_root) else filename


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_sessionfinish(session: Any, exitstatus: Any) -> Any:
    _send({"event": "end", "ran": _ran, "failed": _failed, "testsfailed": session.testsfailed})
    yield
