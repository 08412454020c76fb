"""Where a failing test's failure was raised, judged in looprun's own process.

The outcome plugin judges this inside the test's interpreter, where the test itself can
replace the judge. This module reads only what a run left behind: the frames of a
failure's traceback (``file:line``, innermost first, from a report a process with no
looprun module wrote) and the files of the tree the check ran on. It reads them with
``ast``, never imports or runs them, so nothing the test does while it runs can change
the verdict - short of forging pytest's own traceback text.

A failure is the code's when a frame of the project's code (a file that is not a test,
not a conftest.py) is in its traceback, or when the failing statement in the test (or a
test helper, or the test line that called that helper) may read what the code gave: it
names anything but a builtin, a standard-library module's attribute, a module itself or
a local the test bound from such values. Otherwise it is the test's own: a ``raise``
statement, a ``fail()`` call, an ``assert`` on constants, or a statement reading nothing
the code returned. Anything it cannot read counts as the code's (no false alarm).
"""

from __future__ import annotations

import ast
import builtins
import fnmatch
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath

from looprun.observe.pytest_plugin.looprun_statements import judged, raises_itself
from looprun.observe.traceback import Frame, project_path

_TEST_GLOBS = ("test_*.py", "*_test.py")
_TEST_DIRS = frozenset({"tests", "test", "testing"})
_BUILTINS = frozenset(dir(builtins))
_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | {"builtins"}
_MAX_BYTES = 2_000_000  # a test file larger than this is not read: counts as the code's
_HEADER = "Traceback (most recent call last):"
_FILE_LINE = re.compile(r'^  File "(?P<file>[^"]+)", line (?P<line>\d+), in ')


def native_frames(message: str, text: str, workdir: str) -> list[Frame] | None:
    """The project frames (innermost first) of the exception a ``--tb=native`` report
    ends with; None when the text is not such a traceback.

    Only the last traceback block before the exception's message counts: the message
    (the report's ``message``, which the text ends with) is cut off first, so a message
    holding lines that look like frames, or a chained exception's header, adds none."""
    body, said = text.rstrip(), message.strip()
    if not said or not body.endswith(said):
        return None
    lines = body[: len(body) - len(said)].splitlines()
    starts = [i for i, line in enumerate(lines) if line == _HEADER]
    if not starts:
        return None
    found: list[Frame] = []
    for line in lines[starts[-1] + 1 :]:
        m = _FILE_LINE.match(line)
        if m is None:
            continue
        path = project_path(m["file"], workdir)
        if path:
            found.append(Frame(path, int(m["line"]), line.strip()))
    return list(reversed(found))


def is_test_side(path: str) -> bool:
    """Whether a project file is a test's (a test module, a conftest.py, a helper in a
    tests/ directory) rather than the code under test."""
    parts = PurePosixPath(path).parts
    name = parts[-1] if parts else path
    if name == "conftest.py" or any(fnmatch.fnmatch(name, g) for g in _TEST_GLOBS):
        return True
    return bool(_TEST_DIRS.intersection(parts[:-1]))


def self_raised(found: Sequence[Frame], root: Path) -> str:
    """Why the failure whose project frames (innermost first) are ``found`` was raised
    by the test itself, as ``file:line: why``; '' when it was the code's or unknown."""
    if not found or not all(f.file.endswith(".py") for f in found):
        return ""
    if not all(is_test_side(f.file) for f in found):
        return ""  # raised in the project's code, or below it
    said = ""
    for index, frame in enumerate(found):
        module = _parse(root, frame.file)
        stmt, func = _at(module, frame.line) if module is not None else (None, None)
        if module is None or stmt is None:
            return ""
        if index == 0:
            why = raises_itself(stmt)
            if why:
                return f"{frame.file}:{frame.line}: {why}"
        if _Scope(module, func, _Modules(root, frame.file)).reads_the_code(judged(stmt)):
            return ""
        if index == 0:
            said = (
                f"{frame.file}:{frame.line}: the failing statement reads nothing the code returned"
            )
    return said


def _parse(root: Path, rel: str) -> ast.Module | None:
    path = root / rel
    try:
        if path.is_symlink() or path.stat().st_size > _MAX_BYTES:
            return None
        return ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None


def _at(tree: ast.AST, line: int) -> tuple[ast.stmt | None, ast.AST | None]:
    """The innermost statement spanning ``line`` and the function holding it."""
    stmt: ast.stmt | None = None
    func: ast.AST | None = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt):
            continue
        end = node.end_lineno or node.lineno
        if not node.lineno <= line <= end:
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
            func is None or node.lineno >= getattr(func, "lineno", 0)
        ):
            func = node
        if stmt is None or (node.lineno, -end) >= (stmt.lineno, -(stmt.end_lineno or 0)):
            stmt = node
    return stmt, func


class _Modules:
    """Whether ``from pkg import name`` names a module of the tree: looked for from the
    root and from the test file's directory (where pytest's ``prepend`` import puts it)."""

    def __init__(self, root: Path, test_file: str):
        self.bases = [root, (root / test_file).parent]

    def has(self, package: str, name: str) -> bool:
        where = Path(*package.split("."), name) if package else Path(name)
        return any(
            (base / where).with_suffix(".py").is_file() or (base / where / "__init__.py").is_file()
            for base in self.bases
        )


class _Scope:
    """What the names of one test function may hold, read from its module's source."""

    def __init__(self, module: ast.Module, func: ast.AST | None, found: _Modules):
        self.found = found
        self.stdlib: set[str] = set()  # bound to a standard-library module or its member
        self.modules: set[str] = set()  # bound to another module (the project's, a package)
        self.bound: set[str] = set()  # a helper, a class, a value computed from the code
        self.constants: set[str] = set()  # a top-level value that reads nothing of the code
        values: list[tuple[set[str], ast.AST]] = []
        for node in module.body:
            self._top(node, values)
        self.local: set[str] = set()
        self.tainted: set[str] = set()
        for names, _ in values:
            self.constants.update(names)
        for _ in range(8):  # what a top-level value reads, until nothing changes
            unsafe = {n for names, value in values if self.reads_the_code(value) for n in names}
            if unsafe <= self.bound:
                break
            self.bound |= unsafe
            self.constants -= unsafe
        if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self._function(func)

    def _top(self, node: ast.stmt, values: list[tuple[set[str], ast.AST]]) -> None:
        if isinstance(node, ast.Import):
            self._import(node)
        elif isinstance(node, ast.ImportFrom):
            self._import_from(node, self.bound)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            values.append((_targets(node), node.value))
        else:
            self.bound.update(_targets(node))
        for name in _targets(node) if not isinstance(node, (ast.Import, ast.ImportFrom)) else ():
            self.stdlib.discard(name)
            self.modules.discard(name)

    def _import(self, node: ast.Import) -> None:
        """``import a.b as c``: the name is a module, the standard library's or another."""
        for alias in node.names:
            top = alias.name.split(".")[0]
            name = alias.asname or top
            (self.stdlib if top in _STDLIB else self.modules).add(name)

    def _import_from(self, node: ast.ImportFrom, other: set[str]) -> None:
        package = node.module or ""
        std = not node.level and package.split(".")[0] in _STDLIB
        for alias in node.names:
            name = alias.asname or alias.name
            if std:
                self.stdlib.add(name)
            elif not node.level and self.found.has(package, alias.name):
                self.modules.add(name)  # a module itself: its attributes are judged
            else:
                other.add(name)  # a function, a class, a value: the code's, maybe

    def _function(self, func: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        args = func.args
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
        params += [a for a in (args.vararg, args.kwarg) if a is not None]
        self.tainted = {a.arg for a in params}  # fixtures may hold the project's objects
        binds: list[tuple[list[ast.AST], ast.AST]] = []
        handed: list[tuple[ast.AST, list[ast.AST]]] = []
        for node in ast.walk(func):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                binds.append((list(targets), node.value))
            elif isinstance(node, ast.NamedExpr):
                binds.append(([node.target], node.value))
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                binds.append(([node.target], node.iter))
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                binds += [
                    ([i.optional_vars], i.context_expr) for i in node.items if i.optional_vars
                ]
            elif isinstance(node, ast.Call):
                given = [node.func.value] if isinstance(node.func, ast.Attribute) else []
                handed.append((node.func, [*given, *node.args, *(k.value for k in node.keywords)]))
            elif isinstance(node, ast.Import):
                self._import(node)
            elif isinstance(node, ast.ImportFrom):
                self._import_from(node, self.tainted)
            elif (
                isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and node is not func
            ):
                self.tainted.update(_targets(node))  # a local helper: unknown
        for targets, _ in binds:
            self.local.update(_names(targets))
        for _ in range(8):
            before = len(self.tainted)
            for targets, value in binds:
                if self.reads_the_code(value):
                    self.tainted.update(_names(targets))
            for called, given in handed:
                if self.reads_the_code(called):  # the code may change them in place
                    names = set(filter(None, map(_root_name, given)))
                    # an object, never the module a function is in
                    self.tainted.update(n for n in names if n in self.local or not self._module(n))
            if len(self.tainted) == before:
                break

    def reads_the_code(self, node: ast.AST) -> bool:
        """Whether evaluating ``node`` may read what the code does."""
        if isinstance(node, ast.Attribute):
            root = _root(node)
            if isinstance(root, ast.Name) and root.id in self.modules and self._free(root.id):
                return True  # an attribute of another module: the project's code, maybe
            return self.reads_the_code(node.value)
        if isinstance(node, ast.Name):
            return self._unsafe(node.id)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return True
        return any(self.reads_the_code(child) for child in ast.iter_child_nodes(node))

    def _module(self, name: str) -> bool:
        return name in self.modules or name in self.stdlib

    def _free(self, name: str) -> bool:
        return name not in self.local and name not in self.tainted

    def _unsafe(self, name: str) -> bool:
        if name in self.tainted:
            return True
        if name in self.local:
            return False  # bound in the test from values that read nothing of the code
        if name in self.stdlib or name in self.modules:
            return False  # a module itself (its attributes are judged above)
        if name in self.bound:
            return True  # a helper, a class or a value the module computed
        if name in self.constants:
            return False
        return name not in _BUILTINS


def _root(node: ast.AST) -> ast.AST:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def _root_name(node: ast.AST) -> str:
    root = _root(node)
    return root.id if isinstance(root, ast.Name) else ""


def _names(targets: Iterable[ast.AST]) -> set[str]:
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _targets(node: ast.stmt) -> set[str]:
    """The names a top-level statement binds."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    found: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            found.add(sub.id)
    return found
