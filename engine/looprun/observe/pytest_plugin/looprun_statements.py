"""Which part of a failing test statement decides its failure, and whether the statement
fails of the test's own making: read with ``ast`` alike by the outcome plugin, inside the
tests' interpreter, and by looprun's own judge of a fresh run's tracebacks, outside it.
Standard library only: it is imported in the project's interpreter too."""

from __future__ import annotations

import ast


def judged(stmt: ast.stmt) -> ast.AST:
    """The part of ``stmt`` that decides whether it failed: a compound statement's header
    (a ``with`` block whole: ``pytest.raises`` fails at its end)."""
    if isinstance(stmt, (ast.If, ast.While)):
        return stmt.test
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return stmt.iter
    if isinstance(stmt, ast.Assert):
        return stmt.test
    return stmt


def raises_itself(stmt: ast.stmt) -> str:
    """What makes ``stmt`` a failure of the test's own making whatever it reads."""
    if isinstance(stmt, ast.Raise):
        return "a `raise` statement in the test"
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        func = stmt.value.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name == "fail":
            return "a `fail()` call in the test"
    if isinstance(stmt, ast.Assert) and not any(
        isinstance(n, (ast.Name, ast.Call, ast.Attribute, ast.Subscript))
        for n in ast.walk(stmt.test)
    ):
        return "an `assert` on constants"
    return ""
