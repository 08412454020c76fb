"""The names conditions and prompts read: observer facts and the engine's variables.

Observers that have not run yet (or failed before parsing) still expose every fact their
parser declares, with its empty value, so a condition reading ``tests.failed`` gets 0
rather than an undefined-name crash.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from looprun.data.freeze import freeze
from looprun.errors import LooprunError
from looprun.loop.baseline import baseline_facts
from looprun.loop.plan import PlannedTask
from looprun.loop.state import LoopState
from looprun.observe.base import Observation
from looprun.observe.registry import empty_facts_of
from looprun.template.agents import EMPTY_FACTS
from looprun.template.model import ObserverSpec

NO_SUBLOOPS: dict[str, Any] = {"all_done": True, "failed": 0, "counts": {}, "list": []}


def loop_facts(
    observe: Mapping[str, ObserverSpec],
    facts: Mapping[str, Any],
    *,
    task: PlannedTask,
    state: LoopState,
    inputs: Mapping[str, Any],
    budget: Mapping[str, Any],
    subloops: Mapping[str, Any],
    run: Mapping[str, Any],
) -> dict[str, Any]:
    """Everything a condition, prompt or message may read in one iteration."""
    st = state
    empty = {name: unobserved(spec).to_facts() for name, spec in observe.items()}
    observed = {name: facts[name] if name in facts else empty[name] for name in observe}
    return {
        **observed,
        "baseline": baseline_facts(observe, st.baseline, observed, empty),
        "tasks": st.done_facts,
        "intent": inputs.get("intent", ""),
        "inputs": inputs,
        "iteration": st.task_iteration + 1,
        "task": {
            "id": task.id,
            "goal": task.goal,
            "paths": list(task.paths),
            "attempt": st.task_attempt,
            "index": st.task_index + 1,
            "count": len(st.tasks) if st.tasks is not None else 1,
        },
        "progress": st.progress.facts(),
        "policy": {
            "violations": 0,
            "summary": "",
            "items": [],
            "diff_lines": 0,
            "pending_approvals": [],
        },
        "budget": budget,
        "exit": {"ok": False, "failed": []},
        "subloops": subloops,
        "feedback": st.feedback,
        "run": run,
        "agent": no_agent_facts(),
        "heldout": heldout_facts(st.heldout),
    }


def heldout_facts(recorded: Mapping[str, Any]) -> dict[str, Any]:
    """``heldout``: what became of the held-out variants (``pending`` until asked for)."""
    return {**NO_VARIANTS, **recorded}


NO_VARIANTS: dict[str, Any] = {
    "status": "pending",  # kept | none_kept | unanswered | failed | unhidden | off
    "reason": "",
    "asked": 0,
    "written": 0,
    "kept": 0,
    "tokens": 0,
}


def no_agent_facts() -> dict[str, Any]:
    """``agent`` before any CLI turn (or in a template without one): every fact empty."""
    return copy.deepcopy(EMPTY_FACTS)


def unobserved(spec: ObserverSpec, error: str = "not observed yet") -> Observation:
    """An observation that was not made (not yet, or it failed before parsing).

    Every fact the parser declares is present with its empty value, so a condition or
    prompt reading ``tests.failed`` gets 0 rather than an undefined-name crash.
    """
    return Observation(
        spec.parser, ok=False, ran=False, error=error, facts=freeze(empty_facts(spec.parser))
    )


def empty_facts(parser_name: str) -> dict[str, Any]:
    """The empty facts of a parser by name; an unknown parser (the loader said so) has none."""
    try:
        return empty_facts_of(parser_name)
    except LooprunError:
        return {}
