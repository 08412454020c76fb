"""Judge new tests by mutation: they must fail when the code they cover is changed.

Coverage says a line ran, not that a test would notice it doing something else: a test
that calls the code and asserts nothing (``assert f(1)`` rewritten as ``f(1)``, ``assert
f(1) or True``) raises coverage like a real one. Here the new test files run alone under
coverage.py to find the target lines they cover; small changes are made to those lines one
at a time (a comparison negated, ``+`` and ``-`` swapped, ``and`` and ``or`` swapped, a
condition negated, a returned value replaced by ``None``, an integer constant off by one,
``True`` and ``False`` swapped) and the new tests run again on each: a test failing or
erroring kills the mutant, a green run lets it survive.

Runs in the check's own copy of the tree (never the working tree; the copy is rebuilt
from git before each check, so a mutant left by a crash does not outlive it), restores
every file it changed, and writes a JSON report: ``total``, ``killed``, ``survived``
(``file:line: what changed``), ``score`` and ``ok``. Mutants are chosen deterministically,
spread evenly over the candidates in file and line order. Only the standard library is
imported here; pytest and coverage.py run in child processes of this interpreter.
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TypeVar

T = TypeVar("T")

_NEGATED: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.Gt: ast.LtE,
    ast.LtE: ast.Gt,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_SWAPPED: dict[type[ast.operator], type[ast.operator]] = {ast.Add: ast.Sub, ast.Sub: ast.Add}
_SKIP_DIRS = frozenset({".git", "__pycache__", ".venv", "venv", "node_modules", ".tox"})


@dataclass(frozen=True)
class Mutant:
    """One change to one file: the bytes ``start:end`` replaced by ``text``."""

    path: str
    line: int
    start: int
    end: int
    text: str
    description: str

    def apply(self, source: bytes) -> bytes:
        return source[: self.start] + self.text.encode() + source[self.end :]

    def label(self) -> str:
        return f"{self.path}:{self.line}: {self.description}"


def _offsets(source: bytes) -> list[int]:
    """The byte offset at which each line (1-based index - 1) starts."""
    out, pos = [0], 0
    for line in source.splitlines(keepends=True):
        pos += len(line)
        out.append(pos)
    return out


def _span(node: ast.AST, starts: list[int]) -> tuple[int, int] | None:
    end_line = getattr(node, "end_lineno", None)
    end_col = getattr(node, "end_col_offset", None)
    if end_line is None or end_col is None:
        return None
    return starts[node.lineno - 1] + node.col_offset, starts[end_line - 1] + end_col


def _shown(text: str, limit: int = 60) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 3] + "..."


def _changes(node: ast.AST) -> list[tuple[ast.AST, str, str]]:
    """(node whose span is replaced, replacement source, description) for one node."""
    out: list[tuple[ast.AST, str, str]] = []
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _NEGATED:
        flipped = ast.Compare(node.left, [_NEGATED[type(node.ops[0])]()], node.comparators)
        before, after = ast.unparse(node), ast.unparse(flipped)
        out.append((node, f"({after})", f"`{_shown(before)}` changed to `{_shown(after)}`"))
    elif isinstance(node, ast.BinOp) and type(node.op) in _SWAPPED:
        swapped = ast.BinOp(node.left, _SWAPPED[type(node.op)](), node.right)
        before, after = ast.unparse(node), ast.unparse(swapped)
        out.append((node, f"({after})", f"`{_shown(before)}` changed to `{_shown(after)}`"))
    elif isinstance(node, ast.BoolOp):
        other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        before, after = ast.unparse(node), ast.unparse(ast.BoolOp(other, node.values))
        out.append((node, f"({after})", f"`{_shown(before)}` changed to `{_shown(after)}`"))
    elif isinstance(node, (ast.If, ast.While, ast.IfExp)):
        test = ast.unparse(node.test)
        out.append((node.test, f"(not ({test}))", f"condition `{_shown(test)}` negated"))
    elif isinstance(node, ast.Return) and node.value is not None:
        value = node.value
        if not (isinstance(value, ast.Constant) and value.value is None):
            shown = _shown(ast.unparse(value))
            out.append((value, "(None)", f"`return {shown}` changed to `return None`"))
    elif isinstance(node, ast.Constant) and type(node.value) is bool:
        out.append((node, f"({not node.value})", f"`{node.value}` changed to `{not node.value}`"))
    elif isinstance(node, ast.Constant) and type(node.value) is int:
        n = node.value
        out.append((node, f"({n + 1})", f"`{n}` changed to `{n + 1}`"))
    return out


def _in_fstring(tree: ast.AST) -> set[int]:
    """Nodes inside f-strings, whose positions older interpreters do not give reliably."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            inside.update(id(n) for n in ast.walk(node))
    return inside


def generate(path: str, source: bytes, lines: set[int] | None = None) -> list[Mutant]:
    """Every mutant of ``source`` whose node starts on one of ``lines`` (all when None),
    in line and column order; a file that does not parse has none."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    starts = _offsets(source)
    skip = _in_fstring(tree)
    docstrings = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and n.body
        and isinstance(n.body[0], ast.Expr)
    }
    found: list[tuple[int, int, int, Mutant]] = []
    for node in ast.walk(tree):
        if id(node) in skip or id(node) in docstrings or not hasattr(node, "lineno"):
            continue
        if lines is not None and node.lineno not in lines:
            continue
        for k, (target, text, description) in enumerate(_changes(node)):
            span = _span(target, starts)
            if span is None:
                continue
            mutant = Mutant(path, node.lineno, span[0], span[1], text, description)
            try:
                ast.parse(mutant.apply(source))
            except (SyntaxError, ValueError):
                continue
            found.append((node.lineno, node.col_offset, k, mutant))
    found.sort(key=lambda f: (f[0], f[1], f[2]))
    return [f[3] for f in found]


def spread(items: list[T], limit: int) -> list[T]:
    """At most ``limit`` items, spread evenly over the list (deterministic)."""
    if limit <= 0 or len(items) <= limit:
        return list(items) if limit > 0 else []
    return [items[i * len(items) // limit] for i in range(limit)]


def is_test(path: str) -> bool:
    name = PurePosixPath(path).name
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def _targets(root: str, patterns: list[str]) -> list[str]:
    """The python files under ``root`` that a target path or glob names."""
    out: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        for name in sorted(files):
            rel = os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")
            named = any(rel == p or fnmatch.fnmatch(rel, p) for p in patterns)
            if named and name.endswith(".py") and not is_test(rel):
                out.append(rel)
    return out


def env() -> dict[str, str]:
    """This process's environment, with no bytecode written beside a mutated file."""
    return {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}


def run_tests(tests: list[str], pinned: list[str], timeout: float) -> tuple[int | None, str]:
    """``tests`` (none: the configured suite) once, stopping at the first failure: (exit
    code or None on a timeout, the output's tail)."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *pinned]
    try:
        done = subprocess.run(
            [*cmd, *tests], capture_output=True, text=True, timeout=timeout, env=env()
        )
    except subprocess.TimeoutExpired:
        return None, ""
    return done.returncode, (done.stdout + done.stderr)[-1500:]


def noticed(mutant: Mutant, tests: list[str], pinned: list[str], limit: float) -> bool:
    """Whether ``tests`` (none: the configured suite) fail, err or hang with ``mutant``
    in place; the file is restored whatever happens."""
    with open(mutant.path, "rb") as handle:
        original = handle.read()
    try:
        with open(mutant.path, "wb") as handle:
            handle.write(mutant.apply(original))
        code, _ = run_tests(tests, pinned, limit)
    finally:
        with open(mutant.path, "wb") as handle:
            handle.write(original)
    return code != 0


def line_coverage(
    tests: list[str], targets: list[str], pinned: list[str], data: str, timeout: float
) -> tuple[dict[str, set[int]], dict[str, set[int]], str | None]:
    """The target lines ``tests`` run and those they do not (executable lines only),
    measured under coverage.py on the unchanged code; no tests: the configured suite."""
    measured = {**env(), "COVERAGE_FILE": data}
    run = [sys.executable, "-m", "coverage", "run", "--include=" + ",".join(targets)]
    run += ["-m", "pytest", "-q", "-p", "no:cacheprovider", *pinned, *tests]
    which = "the new tests" if tests else "the suite"
    try:
        first = subprocess.run(run, capture_output=True, text=True, timeout=timeout, env=measured)
    except subprocess.TimeoutExpired:
        return {}, {}, f"{which} did not finish in {timeout:g}s"
    if first.returncode != 0:
        tail = (first.stdout + first.stderr)[-1500:]
        alone = " alone" if tests else ""
        return {}, {}, f"{which}{alone} do not pass on the unchanged code:\n{tail}"
    report = data + ".json"
    made = subprocess.run(
        [sys.executable, "-m", "coverage", "json", "-q", "-o", report],
        capture_output=True,
        text=True,
        env=measured,
    )
    if made.returncode != 0:
        return {}, {}, f"coverage.py wrote no report of the lines {which} run"
    with open(report, encoding="utf-8") as handle:
        files = json.load(handle).get("files", {})
    cwd = os.getcwd()
    executed: dict[str, set[int]] = {}
    missing: dict[str, set[int]] = {}
    for name, entry in files.items():
        rel = os.path.relpath(os.path.join(cwd, name), cwd).replace(os.sep, "/")
        executed[rel] = {int(n) for n in entry.get("executed_lines", [])}
        missing[rel] = {int(n) for n in entry.get("missing_lines", [])}
    return executed, missing, None


def judge(args: argparse.Namespace, pinned: list[str]) -> dict[str, object]:
    changed = json.loads(args.changed)
    tests = sorted(p for p in changed if is_test(str(p)) and os.path.isfile(str(p)))
    report: dict[str, object] = {
        "ok": True,
        "tests": tests,
        "total": 0,
        "killed": 0,
        "survived": [],
        "score": 1.0,
        "error": None,
    }
    targets = _targets(".", [str(p) for p in json.loads(args.targets)])
    if not tests or not targets:
        return report
    data = os.path.join(os.path.dirname(os.path.abspath(args.report)), "mutants.coverage")
    started = time.monotonic()
    covered, _, error = line_coverage(tests, targets, pinned, data, args.timeout * 3)
    # a mutant that loops forever (a negated `while`) is killed by the timeout: a few
    # times what the unchanged run took under coverage, so a sample of them stays short
    limit = min(args.timeout, max(10.0, 4 * (time.monotonic() - started)))
    if error is not None:
        return {**report, "ok": False, "score": 0.0, "error": error}
    candidates: list[Mutant] = []
    for path in targets:
        with open(path, "rb") as handle:
            candidates += generate(path, handle.read(), covered.get(path, set()))
    chosen = spread(candidates, args.max)
    killed, survived = 0, []
    for mutant in chosen:
        if noticed(mutant, tests, pinned, limit):
            killed += 1
        else:
            survived.append(mutant.label())
    total = len(chosen)
    return {
        **report,
        "total": total,
        "killed": killed,
        "survived": survived,
        "score": round(killed / total, 3) if total else 1.0,
    }


def arguments(prog: str) -> argparse.ArgumentParser:
    """The arguments this module and its suite-wide sibling share."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--report", required=True)
    parser.add_argument("--targets", default="[]", help="JSON list of paths or globs")
    parser.add_argument("--changed", default="{}", help="JSON: file -> changed lines")
    parser.add_argument("--max", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=60.0)
    # what looprun appends to pin pytest's configuration, passed on to each pytest run
    parser.add_argument("-c", dest="config", default="")
    parser.add_argument("--rootdir", default="")
    parser.add_argument("--confcutdir", default="")
    parser.add_argument("-o", dest="overrides", action="append", default=[])
    return parser


def pytest_pins(args: argparse.Namespace) -> list[str]:
    """The pinning arguments, as each pytest run takes them."""
    pinned: list[str] = []
    for flag, value in (("-c", args.config), ("--rootdir", args.rootdir)):
        pinned += [flag, value] if value else []
    pinned += ["--confcutdir", args.confcutdir] if args.confcutdir else []
    for override in args.overrides:
        pinned += ["-o", override]
    return pinned


def main(argv: list[str]) -> int:
    args = arguments("looprun_mutants").parse_args(argv)
    report = judge(args, pytest_pins(args))
    with open(args.report, "w", encoding="utf-8") as handle:
        json.dump(report, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
