"""Task dependency graphs: the one cycle check shared by template validation and the
sub-loop scheduler (neither layer should import the other for it)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def find_cycle(graph: Mapping[str, Iterable[str]]) -> list[str] | None:
    """One cycle as a path (first node repeated at the end), or None.

    Edges to nodes that are not keys of ``graph`` are ignored: the template builder
    reports unknown dependencies itself, and the scheduler filters them out first."""
    state: dict[str, int] = {}  # 1 = on the stack, 2 = finished
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in graph:
                continue
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in graph:
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None
