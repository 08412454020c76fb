"""The engine's module map, read with ``ast``: every import (function-local and
``TYPE_CHECKING`` ones included), lines per package, the largest modules, local imports,
and cycles between packages. ``tests/test_architecture.py`` holds the layer contract over
these imports; run this file to see the map:

    python -m tests.support.module_map [CHECKOUT]
"""

from __future__ import annotations

import ast
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted
    target: str  # the imported module (or ``package.name`` when it is a module)
    line: int
    local: bool  # inside a function

    def where(self) -> str:
        return f"{self.module.replace('.', '/')}.py:{self.line}"


def modules(package: Path) -> dict[str, Path]:
    """Dotted name -> file, for every module under ``package`` (``engine/looprun``)."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports_of(module: str, path: Path, known: Mapping[str, Path]) -> Iterator[Import]:
    """Every import in one module; ``from pkg import mod`` names the module ``pkg.mod``."""
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
                yield Import(module, full if full in known else origin, node.lineno, local)


def layer(module: str) -> str:
    """The package (or top-level module) a module belongs to; "" for the package root."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def is_own(imp: Import) -> bool:
    return imp.target == "looprun" or imp.target.startswith("looprun.")


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
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


def package_graph(imports: list[Import]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for imp in filter(is_own, imports):
        src, dst = layer(imp.module), layer(imp.target)
        if src != dst and dst:
            graph[src].add(dst)
    return graph


def main(checkout: Path) -> None:
    package = checkout / "engine" / "looprun"
    known = modules(package)
    imports = [imp for m, p in known.items() for imp in imports_of(m, p, known)]
    sizes = {m: len(p.read_text().splitlines()) for m, p in known.items()}
    per_package: Counter[str] = Counter()
    for m, n in sizes.items():
        is_loose = m.count(".") == 1 and known[m].name != "__init__.py"
        per_package["(top level)" if is_loose else layer(m) or "(root)"] += n
    local = [i for i in imports if i.local]
    print(f"modules: {len(known)}, lines: {sum(sizes.values())}")
    print("lines per package: " + ", ".join(f"{k} {v}" for k, v in per_package.most_common()))
    largest = sorted(sizes.items(), key=lambda kv: -kv[1])[:10]
    print("largest modules: " + ", ".join(f"{m.removeprefix('looprun.')} {n}" for m, n in largest))
    print(f"modules over 300 lines: {sum(1 for n in sizes.values() if n > 300)}")
    own = sum(1 for i in local if is_own(i))
    print(f"function-local imports: {len(local)} ({own} of looprun's own modules)")
    print(f"package cycles: {cycles(package_graph(imports)) or 'none'}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve())
