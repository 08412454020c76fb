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
import os
from collections.abc import Iterable
from pathlib import Path

from looprun.checks.related import imports_of, inside, module_name, test_files
from looprun.data.changes import FileChange, is_test_file

_MAX_FILE_BYTES = 2_000_000
_MAX_CACHED = 2_000
# a test file's top-level tests and the names each one's code uses, by (path, inode,
# mtime, size): a run's later turns parse only the files that changed since
# (modules imported, (test, names its code uses) pairs, (local, imported) alias pairs)
_Items = tuple[frozenset[str], tuple[tuple[str, frozenset[str]], ...], tuple[tuple[str, str], ...]]
_ITEMS: dict[tuple[str, int, int, int], _Items | None] = {}


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
    after = _parse(new)
    before = _parse(old) if old is not None else ast.Module(body=[], type_ignores=[])
    if after is None or before is None:
        return None
    defs_a, rest_a = _split(before.body)
    defs_b, rest_b = _split(after.body)
    if rest_a != rest_b:
        return None  # a module-level statement: what it affects is not a name
    out: set[str] = set()
    for name in defs_a.keys() | defs_b.keys():
        one, two = defs_a.get(name), defs_b.get(name)
        if one is None or two is None or ast.dump(one) != ast.dump(two):
            out.add(name)
            if isinstance(one, ast.ClassDef) and isinstance(two, ast.ClassDef):
                methods_a, _ = _split(one.body)
                methods_b, _ = _split(two.body)
                out.update(
                    m
                    for m in methods_a.keys() | methods_b.keys()
                    if m not in methods_a
                    or m not in methods_b
                    or ast.dump(methods_a[m]) != ast.dump(methods_b[m])
                )
    return out


_Def = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _split(body: list[ast.stmt]) -> tuple[dict[str, ast.stmt], list[str]]:
    """Definitions by name, and every other statement dumped (positions left out, so a
    definition that only moved is no change)."""
    defs: dict[str, ast.stmt] = {}
    rest: list[str] = []
    for node in body:
        if isinstance(node, _Def) and node.name not in defs:
            defs[node.name] = node
        else:
            rest.append(ast.dump(node))
    return defs, rest


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
        st = path.stat()
    except OSError:
        return None
    key = (str(path), st.st_ino, st.st_mtime_ns, st.st_size)
    if key in _ITEMS:
        return _ITEMS[key]
    tree = None
    if st.st_size <= _MAX_FILE_BYTES:
        try:
            tree = _parse(path.read_bytes().decode("utf-8"))
        except (OSError, UnicodeDecodeError):
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
