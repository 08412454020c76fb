"""The tests that name what a turn changed, found by reading code, never running it.

When no test file imports a changed module by its own name (a package that re-exports
it: ``import pkg`` and ``pkg.count(...)``), the file-level selection has nothing to say,
and every wrong fix would cost a whole suite run before the model hears of it. Here the
turn's change is read as the top-level functions and classes whose code differs (a moved
definition is no change), and the tests picked are the test functions and test classes,
in test files importing the changed module or a package on the way to it, whose code
names one of them (``count(...)``, ``pkg.count``, an ``as`` alias).

This is a first look for a fast failure, never a verdict: done is decided on the whole
suite. The answer is ``None`` (unsure: no such tier) whenever the change cannot be read
as definitions: a module-level statement changed, a file removed or not a module of the
tree, a file that does not parse.
"""

from __future__ import annotations

import ast
import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

from looprun.checks.related import imports_of, inside, module_name, test_files
from looprun.data.changes import FileChange, is_test_file

_MAX_FILE_BYTES = 2_000_000
_MAX_CACHED = 2_000
# what a test file holds, by (path, hash of its bytes): a run's later turns parse only
# the files that changed since
# (modules imported, (test, names its code uses) pairs, (local, imported) alias pairs)
_Items = tuple[frozenset[str], tuple[tuple[str, frozenset[str]], ...], tuple[tuple[str, str], ...]]
_ITEMS: dict[tuple[str, bytes], _Items | None] = {}


def related_items(workdir: Path, changes: Iterable[FileChange]) -> tuple[str, ...] | None:
    """Node ids (``tests/test_x.py::test_f``, ``tests/test_x.py::TestC``, sorted) of the
    tests naming a definition ``changes`` (with their old and new text) changed; changed
    test files are selected whole. None when unsure, ``()`` when nothing names them."""
    root = Path(os.path.realpath(workdir))
    names: set[str] = set()
    modules: set[str] = set()
    picked: set[str] = set()
    for change in changes:
        if is_test_file(change.path) and change.status != "D":
            picked.add(change.path)
            continue
        name = module_name(change.path)
        if name is None or change.new is None or change.status not in ("A", "M"):
            return None
        defs = changed_definitions(change.old, change.new)
        if defs is None:
            return None
        names |= defs
        modules |= _with_parents(name)
    if not names:
        return tuple(sorted(picked))
    files = test_files(root)
    if files is None:
        return None
    for rel in files:
        if rel in picked:
            continue
        read = _test_items(root, rel)
        if read is None:
            return None
        imported, items, aliases = read
        if not imported & modules:
            continue
        wanted = names | {local for local, name in aliases if name in names}
        picked.update(f"{rel}::{item}" for item, used in items if used & wanted)
    return tuple(sorted(picked))


def changed_definitions(old: str | None, new: str) -> set[str] | None:
    """The top-level functions and classes (and a changed class's changed methods) whose
    code differs between ``old`` and ``new``; None when anything else changed or either
    text does not parse."""
    after = _outline(new)
    before = _outline(old) if old is not None else ({}, [])
    if after is None or before is None:
        return None
    (defs_a, rest_a), (defs_b, rest_b) = before, after
    if len(rest_a) != len(rest_b) or not all(map(_same, rest_a, rest_b)):
        return None  # a module-level statement: what it affects is not a name
    out: set[str] = set()
    for name in defs_a.keys() | defs_b.keys():
        one, two = defs_a.get(name), defs_b.get(name)
        if one is None or two is None or not _same(one, two):
            out.add(name)
            if isinstance(one, _Code) and isinstance(two, _Code):
                out |= _changed_methods(one.node, two.node)
    return out


class _Code:
    """A statement and its source lines: equal lines need no comparison of trees."""

    __slots__ = ("node", "text")

    def __init__(self, node: ast.stmt, lines: list[str]) -> None:
        decorators = getattr(node, "decorator_list", [])
        start = min([node.lineno, *(d.lineno for d in decorators)])
        self.node = node
        self.text = "\n".join(lines[start - 1 : node.end_lineno or node.lineno])


def _same(a: _Code, b: _Code) -> bool:
    """The same code (positions left out: a definition that only moved is no change)."""
    return a.text == b.text or ast.dump(a.node) == ast.dump(b.node)


def _changed_methods(one: ast.stmt, two: ast.stmt) -> set[str]:
    if not isinstance(one, ast.ClassDef) or not isinstance(two, ast.ClassDef):
        return set()
    a = {n.name: ast.dump(n) for n in one.body if isinstance(n, _Def)}
    b = {n.name: ast.dump(n) for n in two.body if isinstance(n, _Def)}
    return {m for m in a.keys() | b.keys() if a.get(m) != b.get(m)}


_Def = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
_Outline = tuple[dict[str, _Code], list[_Code]]
# a module's outline by its text: a turn's old text is the previous turn's new one
_OUTLINES: dict[str, _Outline | None] = {}


def _outline(text: str) -> _Outline | None:
    """Top-level definitions by name, and every other top-level statement."""
    if text in _OUTLINES:
        return _OUTLINES[text]
    tree = _parse(text)
    out: _Outline | None = None
    if tree is not None:
        lines = text.splitlines()
        defs: dict[str, _Code] = {}
        rest: list[_Code] = []
        for node in tree.body:
            if isinstance(node, _Def) and node.name not in defs:
                defs[node.name] = _Code(node, lines)
            else:
                rest.append(_Code(node, lines))
        out = (defs, rest)
    if len(_OUTLINES) >= 8:
        _OUTLINES.clear()
    _OUTLINES[text] = out
    return out


def _parse(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _test_items(root: Path, rel: str) -> _Items | None:
    """The modules a test file imports, its top-level tests pytest collects by default
    (``test*`` functions, ``Test*`` classes, unittest ``TestCase`` subclasses) with the
    names their code uses, and the local names it imports under another (``as``); None
    when it cannot be read as Python."""
    if not inside(root, rel):
        return None
    path = root / rel
    try:
        with path.open("rb") as fh:
            data = fh.read(_MAX_FILE_BYTES + 1)
    except OSError:
        return None
    key = (rel, hashlib.blake2b(data, digest_size=16).digest())
    if key in _ITEMS:
        return _ITEMS[key]
    tree = None
    if len(data) <= _MAX_FILE_BYTES:
        try:
            tree = _parse(data.decode("utf-8"))
        except UnicodeDecodeError:
            tree = None
    items = (
        None
        if tree is None
        else (frozenset(imports_of(tree, rel)), tuple(_items(tree)), _aliases(tree))
    )
    if len(_ITEMS) >= _MAX_CACHED:
        _ITEMS.clear()
    _ITEMS[key] = items
    return items


def _items(tree: ast.Module) -> Iterable[tuple[str, frozenset[str]]]:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if node.name.startswith("test"):
                yield node.name, _used(node)
        elif isinstance(node, ast.ClassDef) and _test_class(node):
            yield node.name, _used(node)


def _test_class(node: ast.ClassDef) -> bool:
    if node.name.startswith("Test"):
        return True
    for base in node.bases:
        name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", "")
        if isinstance(name, str) and name.endswith("TestCase"):
            return True
    return False


def _used(node: ast.AST) -> frozenset[str]:
    out: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            out.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            out.add(sub.attr)
    return frozenset(out)


def _aliases(tree: ast.Module) -> tuple[tuple[str, str], ...]:
    """(local name, imported name) of each ``from m import name as local``."""
    return tuple(
        (a.asname, a.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for a in node.names
        if a.asname
    )


def _with_parents(name: str) -> set[str]:
    parts = name.split(".")
    return {".".join(parts[: i + 1]) for i in range(len(parts))}
