"""One run of one loop as its steps see it: the template, the ports, the state, the clock.

Every step of an iteration (act, observe, policy, refine, the transitions) reads and
changes the run through this object and nothing else, so a step is a function of it and
a strategy (the act step of an outer loop among them) needs no engine internals.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from looprun.data.value import valueclass
from looprun.loop import limits as caps
from looprun.loop.exchanges import record_reply
from looprun.loop.facts import loop_facts
from looprun.loop.plan import PlannedTask, model_plan, rendered_globs, static_tasks
from looprun.loop.ports import Ports
from looprun.loop.state import LoopState
from looprun.models.base import Reply
from looprun.template.model import Limits, ScopedPattern, Template


@valueclass
class RunInfo:
    """Where a run lives; reachable in templates as ``run``."""

    id: str
    dir: str
    artifacts: str
    workdir: str

    def facts(self) -> dict[str, str]:
        return {
            "id": self.id,
            "dir": self.dir,
            "artifacts": self.artifacts,
            "workdir": self.workdir,
        }


@valueclass
class RunProtect:
    """What the whole run keeps read-only (``act.constraints.protect``), globs rendered once."""

    paths: tuple[str, ...]
    doctests: bool
    allow_new: tuple[str, ...]
    scoped: tuple[ScopedPattern, ...]  # forbidden patterns scoped by path glob


class Loop:
    """The state of one run and the few derived values every step needs."""

    def __init__(
        self,
        template: Template,
        ports: Ports,
        *,
        inputs: Mapping[str, Any],
        run: RunInfo,
        limits: Limits | None = None,
        state: LoopState | None = None,
        invocation: Mapping[str, Any] | None = None,
    ):
        self.template, self.ports, self.run_info = template, ports, run
        self.inputs = dict(inputs)
        # how the run was invoked, as checked when it started: what sub-loops are handed
        # (never run.json read again, which a command may have rewritten meanwhile)
        self.invocation: dict[str, Any] = dict(invocation or {})
        self.limits = limits or template.limits
        self.state = state or LoopState()
        self.t0 = ports.clock.monotonic()
        self.elapsed0 = self.state.elapsed_s
        self.protect = _run_protect(template, self.goal_context())

    # -- what the run knows ---------------------------------------------------------------

    def goal_context(self) -> dict[str, Any]:
        return {"intent": self.inputs.get("intent", ""), "inputs": self.inputs}

    def task(self) -> PlannedTask | None:
        tasks = self.state.tasks or []
        return tasks[self.state.task_index] if self.state.task_index < len(tasks) else None

    def first_task(self) -> PlannedTask:
        """The task the baseline and the preflight are rendered for: the first static task
        (a model's plan is not made yet: the intent stands in for it)."""
        if self.template.plan.mode != "model":
            ctx = {**self.goal_context(), "run": self.run_info.facts()}
            tasks = static_tasks(self.template, ctx)
            if tasks:
                return tasks[0]
        return PlannedTask("", str(self.inputs.get("intent", "")))

    def context(
        self, task: PlannedTask, facts: Mapping[str, Any], subloops: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The names conditions and prompts read (``subloops``: the act step's facts)."""
        return loop_facts(
            self.template.observe,
            facts,
            task=task,
            state=self.state,
            inputs=self.inputs,
            budget=caps.budget_facts(self.limits, self.spent()),
            subloops=subloops,
            run=self.run_info.facts(),
        )

    def elapsed(self) -> float:
        return self.elapsed0 + (self.ports.clock.monotonic() - self.t0)

    def spent(self) -> caps.Spent:
        return self.state.spent(self.elapsed())

    # -- what the run does through its ports ----------------------------------------------

    def plan(
        self, remaining: list[PlannedTask], feedback_done: list[str], feedback: str = ""
    ) -> list[PlannedTask]:
        """The task list: the template's static tasks, or a plan by the plan model."""
        t = self.template
        ctx = {**self.goal_context(), "run": self.run_info.facts()}
        if t.plan.mode != "model":
            tasks = static_tasks(t, ctx)
        else:
            model = self.ports.plan_model or self.ports.model
            tasks = model_plan(
                model,
                t,
                ctx,
                remaining=remaining,
                done=feedback_done,
                feedback=feedback,
                timeout_s=caps.remaining_time(self.limits, self.spent()),
                on_reply=lambda msgs, reply: self.account(reply, "plan", msgs),
                output_cap=lambda msgs: caps.output_cap(
                    self.limits, self.spent(), caps.rough_estimate(msgs)
                ),
            )
        self.ports.journal.event("plan", mode=t.plan.mode, tasks=[x.to_dict() for x in tasks])
        self.ports.report(f"plan: {len(tasks)} task(s): {', '.join(x.id for x in tasks)}")
        return tasks

    def account(self, reply: Reply, role: str, messages: Any) -> None:
        """Charge a model call outside an act turn (the planner's) and record it."""
        record_reply(
            self.ports,
            self.state,
            reply,
            messages,
            iteration=self.state.iterations,
            role=role,
            model=reply.model,
        )

    def positions(self) -> dict[str, int]:
        """Where scripted models stand, so a resume plays on from there."""
        out = {}
        for role, model in (("act", self.ports.model), ("plan", self.ports.plan_model)):
            pos = model.position if model is not None else None
            if pos is not None:
                out[role] = pos
        return out

    def save(self) -> None:
        """Save the state with where the journal and the models stand."""
        st, journal = self.state, self.ports.journal
        st.elapsed_s = self.elapsed()
        st.model_positions = self.positions()
        st.journal_seq = journal.seq
        st.exchanges = journal.exchange_count
        journal.save_state(st.to_dict())


def _run_protect(template: Template, ctx: Mapping[str, Any]) -> RunProtect:
    act = template.act
    protect = act.constraints.protect if act is not None else None
    scoped = act.constraints.scoped_patterns if act is not None else ()
    return RunProtect(
        paths=tuple(rendered_globs(protect.paths if protect else (), ctx)),
        doctests=bool(protect and protect.doctests),
        allow_new=tuple(rendered_globs(protect.allow_new if protect else (), ctx)),
        scoped=tuple(p.render(ctx) for p in scoped),
    )
