"""The checks a schema cannot express: names in scope, constant conditions, the refine
tree as a graph, task dependencies.

These are pure functions over the document's data and the pieces already built; they
return messages, and the Builder locates each one and carries on, so a single
``looprun validate`` reports every mistake.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from looprun.data.taskgraph import find_cycle
from looprun.errors import Location
from looprun.observe.base import COMMON_FACTS
from looprun.observe.registry import declared_empty_facts, get_parser, parser_facts
from looprun.template.expressions import Condition, NameUse
from looprun.template.holdout import scalar_facts
from looprun.template.model import ENGINE_NAMES, Rule, TaskSpec
from looprun.template.suggest import did_you_mean
from looprun.template.yamlpos import JsonPath

# Which names each kind of expression may read (besides observers where noted).
OBSERVER_COMMAND_NAMES = frozenset({"inputs", "run", "intent", "task", "iteration"})
GOAL_NAMES = frozenset({"intent", "inputs"})
HOLDOUT_SOURCE_NAMES = frozenset({"intent", "inputs"})
# what the holdout role's request reads: the task's new tests and what to write
VARIANT_PROMPT_NAMES = frozenset(
    {"intent", "inputs", "count", "file", "tests", "failing", "exceptions"}
)
WITH_NAMES = frozenset({"task", "intent", "inputs"})
PLAN_PROMPT_NAMES = frozenset({"intent", "inputs", "feedback", "run"})
CONDITION_ENGINE_NAMES = ENGINE_NAMES - {"feedback"}

# Whether an input's default fits its declared type.
INPUT_CHECKS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "command": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "list": lambda v: isinstance(v, list),
}


def _sealed_away(parser: str | None) -> frozenset[str]:
    """The facts a held-out observation drops: ``items`` and the parser's facts whose
    values are not numbers or booleans (``failing``, ``failure_types``)."""
    empty: Any = declared_empty_facts(parser) if parser else None
    if parser and empty is None:
        try:
            empty = getattr(get_parser(parser), "empty_facts", None)
        except Exception:  # an unknown parser is reported on its own
            empty = None
    kept = scalar_facts(empty) if isinstance(empty, Mapping) else frozenset()
    dropped = frozenset(empty) - kept if isinstance(empty, Mapping) else frozenset()
    return dropped | {"items"}


def name_problems(
    use: NameUse,
    allowed: frozenset[str],
    what: str,
    *,
    observers: Mapping[str, Any],
    input_names: set[str],
) -> list[str]:
    """Every name (and ``inputs.x`` / ``observer.fact``) an expression reads that will not
    exist where it is evaluated."""
    out: list[str] = []
    for name in sorted(use.names):
        if name in allowed:
            continue
        if name in ENGINE_NAMES or name in observers:
            out.append(f"'{name}' is not available in {what}")
            continue
        hint = did_you_mean(name, allowed)
        out.append(f"unknown name '{name}' in {what}{hint}")
    for name, attr in sorted(use.attributes):
        if name not in allowed:
            continue
        if name == "baseline" and attr not in observers:
            hint = did_you_mean(attr, set(observers))
            out.append(f"baseline.{attr}: no observer named '{attr}'{hint}")
        elif name == "inputs" and attr not in input_names:
            hint = did_you_mean(attr, input_names)
            out.append(f"no input named '{attr}'{hint}")
        elif name in observers and name not in ENGINE_NAMES:
            spec = observers[name]
            parser = spec.get("parser") if isinstance(spec, dict) else None
            parser = parser if isinstance(parser, str) else None
            options = spec.get("options") if isinstance(spec, dict) else None
            facts = parser_facts(parser, options) if parser else None
            if isinstance(spec, dict) and spec.get("holdout") and attr in _sealed_away(parser):
                out.append(
                    f"observer '{name}' is a held-out check: only its numbers and booleans "
                    f"are kept, not '{attr}' (names and messages never reach the loop)"
                )
            elif facts is not None and attr not in facts and attr not in COMMON_FACTS:
                known = facts | COMMON_FACTS
                hint = did_you_mean(attr, known)
                out.append(f"observer '{name}' (parser {parser}) has no fact '{attr}'{hint}")
    return out


def const_truth(cond: Condition) -> bool | None:
    """True/False if a condition is a constant (``true``, ``1``, ``'x'``), else None."""
    return cond.constant


class RuleOrder:
    """The graph checks over one list of refine rules, fed in order: a rule behind an
    unconditional one is unreachable, and so is a rule repeating an earlier condition."""

    def __init__(self) -> None:
        self.blocked_by: tuple[str, int] | None = None
        self.seen_conditions: dict[str, int] = {}

    def unreachable(self) -> str | None:
        """Why the next rule can never fire, if an earlier one always matches first."""
        if self.blocked_by is None:
            return None
        return (
            f"unreachable rule: {self.blocked_by[0]} at line {self.blocked_by[1]} "
            "always matches first"
        )

    def add(self, built: Rule, line: int, if_line: Callable[[], int]) -> list[str]:
        """Record a built rule (at ``line``); problems with its `if`, if any."""
        if built.condition is None:
            self.blocked_by = self.blocked_by or ("the `else`", line)
            return []
        out: list[str] = []
        truth = const_truth(built.condition)
        if truth is True:
            self.blocked_by = self.blocked_by or (
                f"the always-true condition `{built.condition}`",
                line,
            )
        elif truth is False:
            out.append("this condition never holds, so the rule never fires")
        src = " ".join(built.condition.source.split())
        if src in self.seen_conditions:
            out.append(
                "unreachable rule: the same condition at line "
                f"{self.seen_conditions[src]} matches first"
            )
        else:
            self.seen_conditions[src] = if_line()
        return out


def subtree_problems(raw: Sequence[Any], *, top: bool) -> list[str]:
    """A nested rule list must end in an `else`, so every path ends in an action."""
    out: list[str] = []
    if not top and raw and not any(isinstance(r, dict) and "else" in r for r in raw[-1:]):
        out.append("a sub-tree must end with an `else` rule, so that every path ends in an action")
    if not top and not raw:
        out.append("a sub-tree needs at least one rule")
    return out


def dependency_problems(
    raw: Sequence[Any], tasks: Sequence[TaskSpec], seen: Mapping[str, Location]
) -> list[tuple[JsonPath, str]]:
    """``depends_on`` naming itself, an unknown task, or closing a cycle."""
    out: list[tuple[JsonPath, str]] = []
    ids = [t.id for t in tasks]
    for i, task in enumerate(raw):
        if not isinstance(task, dict) or not isinstance(task.get("depends_on"), list):
            continue
        for j, dep in enumerate(task["depends_on"]):
            dpath: JsonPath = ("plan", "tasks", i, "depends_on", j)
            if dep == task.get("id"):
                out.append((dpath, "a task cannot depend on itself"))
            elif dep not in seen:
                out.append((dpath, f"unknown task '{dep}'{did_you_mean(str(dep), ids)}"))
    cycle = find_cycle({t.id: list(t.depends_on) for t in tasks})
    if cycle:
        first = ids.index(cycle[0])
        where: JsonPath = ("plan", "tasks", first, "depends_on")
        out.append((where, "dependency cycle: " + " -> ".join(cycle)))
    return out
