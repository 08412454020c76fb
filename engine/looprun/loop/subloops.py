"""Scheduling of sub-loops: the task graph from ``depends_on`` and what may run next.

Pure data in, pure data out: no threads, no git. The sub-loops act step
(``run/subloops.py``) asks the graph which tasks are ready (every dependency done), which
can never run (a dependency failed), and in which order finished work is merged (the
plan's order within the dependency order).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from looprun.data.taskgraph import find_cycle
from looprun.data.value import valueclass
from looprun.errors import LooprunError

TOTAL_COUNTS = ("calls", "turns", "tool_calls", "denials", "tokens")  # agent totals
MAX_DEPTH = 8  # the same bound the template loader enforces (MAX_SUBLOOP_DEPTH)


class ScheduleError(LooprunError):
    """A plan that cannot be scheduled: a dependency cycle, an unknown task, too deep."""


@valueclass
class Node:
    """A task in the sub-loop dependency graph."""

    id: str
    depends_on: tuple[str, ...] = ()


class TaskGraph:
    """The tasks still to run, and the ids already satisfied (done earlier)."""

    def __init__(self, nodes: Sequence[Node], satisfied: Iterable[str] = ()):
        self.nodes = {n.id: n for n in nodes}
        if len(self.nodes) != len(nodes):
            dupes = sorted({n.id for n in nodes if [m.id for m in nodes].count(n.id) > 1})
            raise ScheduleError(f"duplicate task ids in the plan: {', '.join(dupes)}")
        self.satisfied = frozenset(satisfied)
        self.order = [n.id for n in nodes]
        for n in nodes:
            unknown = [d for d in n.depends_on if d not in self.nodes and d not in self.satisfied]
            if unknown:
                raise ScheduleError(f"task {n.id} depends on unknown task(s): {', '.join(unknown)}")
        cycle = find_cycle({n.id: [d for d in n.depends_on if d in self.nodes] for n in nodes})
        if cycle:
            raise ScheduleError("dependency cycle: " + " -> ".join(cycle))

    def ready(self, done: Iterable[str], started: Iterable[str]) -> list[str]:
        """Tasks not started whose dependencies are all done, in plan order."""
        ok = self.satisfied | set(done)
        taken = set(started)
        return [
            i
            for i in self.order
            if i not in taken and all(d in ok for d in self.nodes[i].depends_on)
        ]

    def blocked(self, failed: Iterable[str]) -> dict[str, str]:
        """Tasks that can never run because a dependency failed: id -> the failed dependency."""
        out: dict[str, str] = {}
        bad = set(failed)
        changed = True
        while changed:
            changed = False
            for i in self.order:
                if i in out or i in bad:
                    continue
                for d in self.nodes[i].depends_on:
                    if d in bad or d in out:
                        out[i] = out.get(d, d)
                        changed = True
                        break
        return out


def check_nesting(chain: Sequence[str], uses: str, *, max_depth: int = MAX_DEPTH) -> None:
    """Refuse a sub-loop that would nest deeper than ``max_depth`` or run a template again
    that is already running above it (``chain``: the templates from the outermost down)."""
    if uses in chain:
        raise ScheduleError("each_task.uses cycle: " + " -> ".join([*chain, uses]))
    if len(chain) >= max_depth:
        raise ScheduleError(f"sub-loops nested deeper than {max_depth}: {' -> '.join(chain)}")


FAILED_OUTCOMES = ("exhausted", "stalled", "escalated", "aborted", "error", "conflict", "blocked")


def subloop_facts(tasks: Sequence[str], records: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``subloops`` in conditions: the results of the current plan's tasks.

    ``failed`` is a count (0 is false in a condition), ``all_done`` holds when every
    planned task has a ``done`` result, ``counts`` maps outcome -> number, and ``list``
    holds one record per task: id, template, outcome, reason, iterations, attempt, tokens,
    changed, agent (the totals of a sub-loop whose act is an agent CLI, else {}).
    ``agent`` adds those totals up over the tasks.
    """
    rows = []
    for tid in tasks:
        r = records.get(tid)
        if r is None:
            rows.append(
                {
                    "id": tid,
                    "template": "",
                    "outcome": "pending",
                    "reason": "",
                    "iterations": 0,
                    "attempt": 0,
                    "tokens": 0,
                    "changed": [],
                    "agent": {},
                }
            )
            continue
        rows.append(
            {
                "id": tid,
                "template": r.get("template", ""),
                "outcome": r.get("outcome", "pending"),
                "reason": r.get("reason", ""),
                "iterations": r.get("iterations", 0),
                "attempt": r.get("attempt", 0),
                "tokens": r.get("tokens", 0),
                "changed": list(r.get("changed", [])),
                "agent": dict(r.get("agent") or {}),
            }
        )
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["outcome"]] = counts.get(row["outcome"], 0) + 1
    failed = sum(counts.get(o, 0) for o in FAILED_OUTCOMES)
    return {
        "all_done": bool(rows) and all(r["outcome"] == "done" for r in rows),
        "failed": failed,
        "done": counts.get("done", 0),
        "total": len(rows),
        "counts": counts,
        "list": rows,
        "agent": sum_totals(r["agent"] for r in rows),
    }


def sum_totals(rows: Any) -> dict[str, Any]:
    """Several runs' agent totals added up (an outer loop's sub-loops)."""
    out: dict[str, Any] = {k: 0 for k in TOTAL_COUNTS} | {"cost_usd": 0.0}
    for row in rows:
        for key in TOTAL_COUNTS:
            out[key] += int(row.get(key, 0) or 0)
        out["cost_usd"] += float(row.get("cost_usd", 0.0) or 0.0)
    return out
