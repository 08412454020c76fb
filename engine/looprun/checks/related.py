"""The test files related to a turn's changes, found by reading imports, never running them.

A test file is related when it changed, or when it imports (directly, by name, as ``ast``
reads it) a module the turn changed, or a package on the way to one (``import pkg`` runs
``pkg/__init__.py``, and so does ``import pkg.mod``). Repository code is only parsed.

The answer is ``None`` whenever the selection could miss a test the change affects:
a changed file that is not a module of the tree (``conftest.py``, a data file, a
configuration), a test file that cannot be read or parsed, one too large, a link out of
the tree, too many files, or every test file of the tree. ``None`` means "run the whole
suite", never "nothing related".
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from looprun.data.changes import is_test_file

_MAX_FILE_BYTES = 2_000_000  # a test file larger than this is not parsed: unsure
_MAX_TEST_FILES = 2_000  # more test files than this: not worth reading, run whole
_MAX_CACHED = 10_000
# what a test file imports, by (path, inode, mtime, size): a run's later iterations parse
# only the files that changed since
_PARSED: dict[tuple[str, int, int, int], frozenset[str] | None] = {}
_SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", "node_modules", "__pycache__"}
)


def related_tests(workdir: Path, changed: Sequence[str]) -> tuple[str, ...] | None:
    """The test files (relative paths, sorted) related to the ``changed`` paths; ``None``
    when unsure (then the whole suite must run)."""
    root = Path(os.path.realpath(workdir))
    modules: set[str] = set()
    picked: set[str] = set()
    for path in changed:
        if is_test_file(path):
            picked.add(path)
            continue
        name = module_name(path)
        if name is None:
            return None  # not a module of the tree: what it affects cannot be read off imports
        modules.add(name)
    tests = test_files(root)
    if tests is None:
        return None
    for rel in tests:
        if rel in picked or not modules:
            continue
        imported = imported_modules(root, rel)
        if imported is None:
            return None
        if imported & modules:
            picked.add(rel)
    if tests and set(tests) <= picked:
        return None  # every test file: the whole command is the same run
    return tuple(sorted(p for p in picked if inside(root, p)))


def module_name(path: str) -> str | None:
    """``pkg/mod.py`` -> ``pkg.mod``; ``pkg/__init__.py`` -> ``pkg``; ``src/`` layouts drop
    ``src``. None for anything that is not a plain importable module path."""
    if not path.endswith(".py") or path.rsplit("/", 1)[-1] == "conftest.py":
        return None
    parts = path[:-3].split("/")
    if parts[0] in ("src", "lib") and len(parts) > 1:
        parts = parts[1:]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if not parts or not all(p.isidentifier() for p in parts):
        return None
    return ".".join(parts)


def test_files(root: Path) -> list[str] | None:
    """Every test file under ``root``, not following links to directories."""
    found: list[str] = []
    for here, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        for f in sorted(files):
            if is_test_file(f):
                found.append(os.path.relpath(os.path.join(here, f), root).replace(os.sep, "/"))
        if len(found) > _MAX_TEST_FILES:
            return None
    return found


def inside(root: Path, rel: str) -> bool:
    """A regular file whose real path is in the tree (a link out of it is never run)."""
    real = Path(os.path.realpath(root / rel))
    return real.is_file() and (real == root or root in real.parents)


def tree_text(root: Path, rel: str) -> str | None:
    """A root-relative file's text; None when there is none; OSError when it is not one
    the tree's own reading may trust (a link out of it, not a regular file, too large)."""
    full = root / rel
    if not full.exists() and not full.is_symlink():
        return None
    if not inside(root, rel) or full.stat().st_size > _MAX_FILE_BYTES:
        raise OSError(f"{rel}: not a file of the tree, or larger than a test file is read")
    return full.read_bytes().decode("utf-8", "replace")


def imported_modules(root: Path, rel: str) -> set[str] | None:
    """The module names a test file imports, packages on the way included; None when
    it cannot be read as Python (unsure)."""
    if not inside(root, rel):
        return None
    path = root / rel
    try:
        st = path.stat()
    except OSError:
        return None
    key = (str(path), st.st_ino, st.st_mtime_ns, st.st_size)
    if key in _PARSED:
        known = _PARSED[key]
        return None if known is None else set(known)
    names = None if st.st_size > _MAX_FILE_BYTES else _parsed_imports(path, rel)
    if len(_PARSED) >= _MAX_CACHED:
        _PARSED.clear()
    _PARSED[key] = None if names is None else frozenset(names)
    return names


def _parsed_imports(path: Path, rel: str) -> set[str] | None:
    try:
        tree = ast.parse(path.read_bytes(), filename=rel)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return imports_of(tree, rel)


def imports_of(tree: ast.Module, rel: str) -> set[str]:
    """The module names the parsed test file ``rel`` imports, packages on the way included."""
    package = rel[:-3].split("/")[:-1]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(_with_parents(a.name for a in node.names))
        elif isinstance(node, ast.ImportFrom):
            base = _from_base(node, package)
            if base is None:
                continue
            names.update(_with_parents([base]))
            names.update(f"{base}.{a.name}" if base else a.name for a in node.names)
    return names


def _from_base(node: ast.ImportFrom, package: list[str]) -> str | None:
    """The absolute module a ``from ... import`` names (relative ones resolved against
    the test file's directory, read as a package)."""
    if not node.level:
        return node.module
    if node.level - 1 > len(package):
        return None
    parts = package[: len(package) - (node.level - 1)]
    if node.module:
        parts = [*parts, *node.module.split(".")]
    return ".".join(parts)


def _with_parents(names: Iterable[str]) -> set[str]:
    out: set[str] = set()
    for name in names:
        parts = name.split(".")
        out.update(".".join(parts[: i + 1]) for i in range(len(parts)))
    return out
