"""Which pytest test files name their parametrized cases the same on every run.

A case's id is made from its parameter values (``test_f[a-b]``), or from their position
for values pytest cannot spell. Values written as literals give the same ids in every
process; values drawn from a set follow its hash order, and computed ones can be
anything, so only a second run of the same tree tells which ids move. The baseline asks
this module first and runs again only the files it cannot vouch for.

Read with ``ast``, never run. A file is vouched for when every parametrization in it and
in the ``conftest.py`` files above it is made of literals: ``@pytest.mark.parametrize``
(also as ``pytestmark``), ``pytest.param(...)`` entries, a fixture's ``params=``, with
module-level names bound once to such literals (``CASES = ((1, 2), ...)``), ``+`` of
them and a literal dict's ``.items()``/``.keys()``/``.values()``. A set display, a
comprehension, a call, an imported name, a ``pytest_generate_tests`` hook or a
``pytest_plugins`` list is not vouched for. Parameters that an installed plugin adds
without any of these in the files are taken as stable.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from pathlib import PurePosixPath

_HOOK = "pytest_generate_tests"
_DICT_VIEWS = ("items", "keys", "values")


def varying(read: Callable[[str], str | None], files: Sequence[str]) -> tuple[str, ...] | None:
    """Of the root-relative test ``files``, those whose parametrized ids may differ on
    another run; None when one of them, or a conftest.py above it, cannot be read (only a
    second run can tell). ``read`` gives None for a file that does not exist and raises
    OSError for one it cannot read."""
    verdicts: dict[str, bool | None] = {}

    def fixed(path: str) -> bool | None:
        if path not in verdicts:
            text = read(path)
            verdicts[path] = None if text is None else literal_module(text)
        return verdicts[path]

    out = []
    try:
        for file in files:
            own = fixed(file)
            if own is None:
                return None
            if not own or any(fixed(c) is False for c in _conftests(file)):
                out.append(file)
    except OSError:
        return None
    return tuple(out)


def _conftests(file: str) -> list[str]:
    parents = PurePosixPath(file).parents
    return [str(p / "conftest.py") if str(p) != "." else "conftest.py" for p in parents]


def literal_module(text: str) -> bool:
    """Whether every parametrization in a module's ``text`` is made of literals."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False  # not Python, or nested past what the parser builds: not vouched for
    names = _bindings(tree)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == _HOOK:
            return False
        if isinstance(node, ast.Name) and node.id == "pytest_plugins":
            return False
        if isinstance(node, ast.Call) and not _literal_call(node, names):
            return False
    return True


def _bindings(tree: ast.Module) -> dict[str, ast.expr]:
    """Module-level names bound exactly once, by a plain assignment, and only read where
    nothing can change their value (no method call, item assignment, alias or argument)."""
    counts: dict[str, int] = {}
    values: dict[str, ast.expr] = {}
    for stmt in tree.body:
        for target in _targets(stmt):
            counts[target] = counts.get(target, 0) + 1
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
            if isinstance(target, ast.Name):
                values[target.id] = stmt.value
    for node in ast.walk(tree):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:
                counts[name] = counts.get(name, 0) + 2
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Name) or node.id not in values or _stores(node):
            continue
        if not _read_only(node, parents):
            counts[node.id] = 2
    return {k: v for k, v in values.items() if counts.get(k) == 1}


# calls that take a value without keeping or changing it
_READERS = ("len", "sorted", "list", "tuple", "enumerate", "zip", "reversed", "repr", "str")


def _read_only(node: ast.Name, parents: dict[ast.AST, ast.AST]) -> bool:
    """Whether this use of a name leaves its value as it is."""
    parent = parents.get(node)
    if isinstance(parent, ast.Attribute):
        call = parents.get(parent)
        return parent.attr in _DICT_VIEWS and isinstance(call, ast.Call) and call.func is parent
    if isinstance(parent, ast.Call):
        return node is not parent.func and _callee(parent) in ("parametrize", "param", *_READERS)
    if isinstance(parent, ast.keyword):
        call = parents.get(parent)
        return isinstance(call, ast.Call) and _callee(call) in ("parametrize", "param", "fixture")
    if isinstance(parent, ast.Subscript):
        return isinstance(parent.ctx, ast.Load)
    return isinstance(
        parent, (ast.BinOp, ast.Tuple, ast.List, ast.Compare, ast.For, ast.comprehension)
    )


def _targets(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in stmt.names]
    return [n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and _stores(n)]


def _stores(node: ast.Name) -> bool:
    return isinstance(node.ctx, (ast.Store, ast.Del))


def _callee(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _literal_call(node: ast.Call, names: dict[str, ast.expr]) -> bool:
    """A call that parametrizes is vouched for when its values are literals; any other
    call is not a parametrization and says nothing."""
    callee = _callee(node)
    if callee == "parametrize":
        return (
            all(_literal(a, names) for a in node.args[:1])
            and all(_cases(a, names) for a in node.args[1:2])
            and all(
                _cases(k.value, names) if k.arg == "argvalues" else _literal(k.value, names)
                for k in node.keywords
            )
        )
    if callee == "fixture":
        return all(
            _cases(k.value, names) if k.arg == "params" else _literal(k.value, names)
            for k in node.keywords
            if k.arg in ("params", "ids")
        )
    return True


def _cases(node: ast.expr, names: dict[str, ast.expr], depth: int = 0) -> bool:
    """A parametrization's values: a literal list/tuple of cases, a name bound to one,
    ``+`` of them, or a literal dict's view."""
    if depth > 20:
        return False
    if isinstance(node, ast.Name):
        bound = names.get(node.id)
        return bound is not None and _cases(bound, names, depth + 1)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _cases(node.left, names, depth + 1) and _cases(node.right, names, depth + 1)
    if isinstance(node, (ast.List, ast.Tuple)):
        return all(_case(e, names) for e in node.elts)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _DICT_VIEWS
        and not node.args
        and not node.keywords
    ):
        return _dict(node.func.value, names)
    return False


def _case(node: ast.expr, names: dict[str, ast.expr]) -> bool:
    """One case: a literal, or ``pytest.param`` of literals (its marks can be anything:
    they do not name the case)."""
    if isinstance(node, ast.Call) and _callee(node) == "param":
        return all(_literal(a, names) for a in node.args) and all(
            k.arg == "marks" or _literal(k.value, names) for k in node.keywords
        )
    return _literal(node, names)


def _dict(node: ast.expr, names: dict[str, ast.expr]) -> bool:
    if isinstance(node, ast.Name):
        node = names.get(node.id, node)
    return isinstance(node, ast.Dict) and _literal(node, names)


def _literal(node: ast.expr | None, names: dict[str, ast.expr], depth: int = 0) -> bool:
    """A constant, or a tuple/list/dict of them (never a set: its order follows the hash
    seed), or a module-level name bound to one."""
    if node is None or depth > 20:
        return False
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return isinstance(node.operand, ast.Constant)
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_literal(e, names, depth + 1) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and _literal(k, names, depth + 1) for k in node.keys) and all(
            _literal(v, names, depth + 1) for v in node.values
        )
    if isinstance(node, ast.Name):
        bound = names.get(node.id)
        return bound is not None and _literal(bound, names, depth + 1)
    return False
