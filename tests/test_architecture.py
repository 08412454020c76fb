"""The layer contract, held statically over every import in the engine, function-local and
``TYPE_CHECKING`` ones included, plus the run-time checks that only importing can show.

Layers go bottom to top; a module may import its own package and anything in a layer below
it, never above. A total order makes package cycles impossible, and the test that looks
for cycles says so in words when a new edge closes one. Function-local imports hide edges
from a reader and from this test's first half, so they are allowed only where a heavy
optional dependency is loaded on demand, and each such place is listed here with why.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "engine" / "looprun"

# bottom to top: what each holds is in docs/engine.md ("Layout")
LAYERS = (
    "errors",  # the one error tree
    "data",  # plain values: freeze, globs, task graph, changes, patch text
    "system",  # OS edges: processes, redaction, atomic and no-follow files, crash points
    "sandbox",  # bubblewrap and Landlock
    "observe",  # parsers: pure functions of output, and their catalog
    "models",  # model clients, prices, the user's config file
    "template",  # the language
    "loop",  # the interpreter, over the ports in loop/ports.py
    "workspace",  # adapter: git, snapshots, patches, commits
    "checks",  # adapter: running observers' commands (pinned configs, held-out copies)
    "act",  # adapter: tools, policy, agent CLIs
    "journal",  # adapter: the run record, bundles, sealed refs
    "report",  # md / html / json from a run's record
    "run",  # the composition root
    "remote",  # Ray, on top of run/
    "cli",  # argv, environment, terminal, one module per subcommand
)
# The interpreter does no I/O: beyond the layers below it, it may use only these of
# system/ (pure text functions).
LOOP_MAY_USE_OF_SYSTEM = {"looprun.system.redact"}

# (importing module, imported module) -> why it is imported inside a function
LOCAL_IMPORTS: dict[tuple[str, str], str] = {
    # adapters
    ("looprun.remote.ray_cluster", "ray"): (
        "Ray is optional and slow to import: loaded when a Ray executor connects, so "
        "--executor ray can be parsed, and the executor module imported, without it"
    ),
}


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted
    target: str  # the imported module (or ``package.name`` when it is a module)
    line: int
    local: bool  # inside a function

    def where(self) -> str:
        return f"{self.module.replace('.', '/')}.py:{self.line}"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(module: str, path: Path) -> Iterator[Import]:
    tree = ast.parse(path.read_text(), str(path))
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inside.update(id(n) for n in ast.walk(node) if n is not node)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        local = id(node) in inside
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, alias.name, node.lineno, local)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                origin = ".".join([*base, *([node.module] if node.module else [])])
            else:
                origin = node.module or ""
            for alias in node.names:
                full = f"{origin}.{alias.name}"
                yield Import(module, full if full in MODULES else origin, node.lineno, local)


IMPORTS = [imp for module, path in MODULES.items() for imp in _imports(module, path)]


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""  # "" is the package root (its version)


def _own(imp: Import) -> bool:
    return imp.target == "looprun" or imp.target.startswith("looprun.")


def test_every_package_and_top_level_module_has_a_layer() -> None:
    unplaced = sorted({_layer(m) for m in MODULES} - set(LAYERS) - {"", "__main__"})
    assert not unplaced, f"modules outside the layer table: {unplaced}"


def test_imports_go_one_way_bottom_to_top() -> None:
    rank = {name: i for i, name in enumerate(LAYERS)}
    upward = []
    for imp in filter(_own, IMPORTS):
        src, dst = _layer(imp.module), _layer(imp.target)
        if src in {"", "__main__"} or dst == "" or src == dst:
            continue
        if rank[dst] > rank[src]:
            upward.append(f"{imp.where()}: {src}/ imports {imp.target} ({dst}/ is above it)")
    assert not upward, "\n".join(sorted(set(upward)))


def test_the_interpreter_uses_no_os_edge() -> None:
    found = [
        f"{imp.where()}: {imp.target}"
        for imp in filter(_own, IMPORTS)
        if _layer(imp.module) == "loop"
        and _layer(imp.target) in {"system", "sandbox"}
        and imp.target not in LOOP_MAY_USE_OF_SYSTEM
    ]
    assert not found, "\n".join(found)


def test_no_cycles_between_packages() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for imp in filter(_own, IMPORTS):
        src, dst = _layer(imp.module), _layer(imp.target)
        if src != dst and dst:
            graph[src].add(dst)
    cycles = _cycles(graph)
    assert not cycles, f"package cycles: {cycles}"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                component.append(w)
            component.append(v)
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_function_local_imports_are_only_the_listed_ones() -> None:
    found = {(imp.module, imp.target): imp for imp in IMPORTS if imp.local}
    unlisted = [
        f"{imp.where()}: import {imp.target}"
        for key, imp in sorted(found.items())
        if key not in LOCAL_IMPORTS
    ]
    assert not unlisted, "function-local imports not in LOCAL_IMPORTS:\n" + "\n".join(unlisted)
    stale = sorted(set(LOCAL_IMPORTS) - set(found))
    assert not stale, f"listed local imports that no longer exist: {stale}"


def test_the_import_reader_sees_local_and_relative_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "looprun" / "loop"
    pkg.mkdir(parents=True)
    src = pkg / "engine.py"
    src.write_text("from . import ports\ndef f():\n    from looprun.run import runner\n")
    seen = list(_imports("looprun.loop.engine", src))
    assert [(i.target, i.local) for i in seen] == [
        ("looprun.loop.ports", False),
        ("looprun.run", True),
    ]


# -- what only importing shows: the heavy libraries each layer loads ---------------------

LOOP = PACKAGE / "loop"
CORE = sorted(p.stem for p in LOOP.glob("*.py") if p.stem != "__init__")
# HTTP, git, YAML, the schema validator and the terminal stay behind the ports.
FORBIDDEN = (
    "httpx",
    "yaml",
    "jsonschema",
    "click",
    "looprun.workspace",
    "looprun.workspace.git",
    "looprun.workspace.tree",
    "looprun.models.http",
    "looprun.models.openai",
    "looprun.models.anthropic",
    "looprun.sandbox",
    "looprun.sandbox.bwrap",
    "looprun.sandbox.landlock",
)


def _loaded_after(code: str) -> set[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_the_core_module_list_is_not_empty() -> None:
    assert {"engine", "turn", "limits", "progress", "refine"} <= set(CORE)


@pytest.mark.parametrize("module", CORE)
def test_loop_core_imports_nothing_of_http_git_yaml_or_the_terminal(module: str) -> None:
    loaded = _loaded_after(f"import looprun.loop.{module}")
    assert not loaded & set(FORBIDDEN), f"looprun.loop.{module} pulls in {loaded & set(FORBIDDEN)}"


def test_importing_the_package_has_no_side_effects_beyond_loading() -> None:
    loaded = _loaded_after("import looprun, looprun.cli.main")
    assert "jsonschema" not in loaded and "httpx" not in loaded


@pytest.mark.parametrize("args", [["--help"], ["runs", "--json"], ["schema", "--help"]])
def test_commands_that_do_not_validate_do_not_import_jsonschema(
    args: list[str], tmp_path: Path
) -> None:
    code = (
        "import sys, runpy\n"
        f"sys.argv = ['looprun', *{args!r}]\n"
        "try:\n"
        "    runpy.run_module('looprun', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "import json\n"
        "print()\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('jsonschema', 'httpx')))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert json.loads(out.stdout.splitlines()[-1]) == [], out.stderr
