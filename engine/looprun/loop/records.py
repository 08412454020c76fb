"""What one iteration found (``Step``) and what it leaves in the journal: the full
observation record and the event.

``observations/NNNN.json`` holds everything the decision was made from (facts, exit
values, limits, policy, the decision and the checkpoint); the ``iteration`` event is the
one-line version a reader scans.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any

from looprun.data.value import valueclass
from looprun.loop.act.step import Turn
from looprun.loop.feedback import observation_line
from looprun.loop.outcome import Stop
from looprun.loop.plan import PlannedTask
from looprun.loop.policy_step import PolicyFindings
from looprun.loop.ports import Journal
from looprun.loop.progress import Progress
from looprun.loop.refine import Decision
from looprun.loop.state import LoopState
from looprun.observe.base import Observation


@valueclass
class Step:
    """One iteration's findings, before its decision is applied."""

    turn: Turn
    observations: Mapping[str, Observation]
    exit_values: tuple[tuple[str, bool], ...]
    policy: PolicyFindings
    decision: Decision  # kind "done" when the task's exit conditions hold
    feedback: str
    progress: Progress = field(default_factory=Progress)
    cannot_run: str = ""  # an observer's command could not start (exit 126/127)
    observer_edit: str = ""  # an observer changed the tree it checked (undone)


def record_iteration(
    journal: Journal,
    state: LoopState,
    task: PlannedTask,
    step: Step,
    d: Decision,
    stop: Stop | None,
    *,
    intent: str,
    limits: Mapping[str, Any],
    task_iteration: int | None = None,
) -> None:
    """Save one iteration's observation record and journal its event."""
    st = state
    n = st.iterations
    nxt = stop.to_dict() if stop else d.to_dict()
    usage = {"tokens": step.turn.tokens, "cost_usd": round(step.turn.cost_usd, 6)}
    record = {
        "iteration": n,
        "task_iteration": st.task_iteration if task_iteration is None else task_iteration,
        "intent": intent,
        "task": task.to_dict(),
        "tools": step.turn.tools,
        "observers": {k: obs_record(o) for k, o in step.observations.items()},
        "exit": [{"condition": c, "value": v} for c, v in step.exit_values],
        "limits": limits,
        "progress": st.progress.facts(),
        "policy": step.policy.facts(),
        "decision": d.to_dict(),
        "next": nxt,
        "checkpoint": st.current,
        # the tree this iteration's act turn started from; its own tree is the checkpoint
        # ref <run_id>/<n>, so a report can show what this iteration changed
        "start": st.previous,
        "usage": usage,
    }
    journal.save_observation(n, record)
    journal.event(
        "iteration",
        iteration=n,
        task=task.id,
        tools=step.turn.tools,
        observers={k: observation_line(k, o) for k, o in step.observations.items()},
        exit_ok=all(v for _, v in step.exit_values),
        decision=d.to_dict(),
        stop=stop.to_dict() if stop else None,
        checkpoint=st.current,
        usage=usage,
    )


def obs_record(o: Observation) -> dict[str, Any]:
    facts = o.to_facts()
    facts["feedback"] = o.feedback[:4000]
    return facts
