"""The interpreter of one loop: plan → (act → observe → refine)* → outcome.

An iteration is one act step, one observation of the real working tree by every
observer, the policy checked on the real diff, and one decision. A task is complete only
when its exit conditions hold on those fresh observations; nothing the model says ends a
loop. Every stop has a named reason. The engine talks to the world only through
``Ports``; how it acts (a tool turn, an agent CLI, sub-loops) is its ``ActStep``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from looprun.errors import LooprunError, UsageError
from looprun.loop import limits as caps
from looprun.loop import transitions
from looprun.loop.act.agent_turn import AgentTurn
from looprun.loop.act.step import ActStep
from looprun.loop.act.tool_turn import ToolTurn
from looprun.loop.core import Loop, RunInfo
from looprun.loop.facts import unobserved
from looprun.loop.feedback import ATTEMPTS_KEPT, attempt_line, compose, observer_blocks
from looprun.loop.finish import done_reason, finish
from looprun.loop.observe_step import ObserveStep, narrowed
from looprun.loop.outcome import RunResult, Stop
from looprun.loop.plan import PlanError, PlannedTask
from looprun.loop.policy_step import NOTHING_FOUND, policy
from looprun.loop.ports import Ports
from looprun.loop.preflight import cannot_run
from looprun.loop.progress import fingerprint
from looprun.loop.records import Step, record_iteration
from looprun.loop.refine import Decision, check_exit, judge
from looprun.loop.start import start
from looprun.loop.state import LoopState
from looprun.observe.base import Observation
from looprun.template.model import Limits, Template

__all__ = ["Engine", "RunInfo", "run_loop", "with_iterations"]


class Engine:
    """Runs one template to an outcome; ``run`` is the loop, its steps live beside it."""

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
        if template.act is None and template.each_task is None:
            raise LooprunError(f"{template.source}: template has no act section to run")
        self.loop = Loop(
            template,
            ports,
            inputs=inputs,
            run=run,
            limits=limits,
            state=state,
            invocation=invocation,
        )
        self.act = _act_step(self.loop)
        self.observing = ObserveStep(self.loop)

    @property
    def state(self) -> LoopState:
        return self.loop.state

    # -- the loop ---------------------------------------------------------------------------

    def run(self, approval: bool | None = None) -> RunResult:
        """Run to an outcome; ``approval`` answers a resumed run's pending approval."""
        lp = self.loop
        try:
            stop = start(lp, self.act, self.observing)
            if stop is None and approval is not None and lp.state.pending is not None:
                stop = transitions.resume_approval(lp, self.act, approval)
            while stop is None and (task := lp.task()) is not None:
                stop = caps.before_iteration(lp.limits, lp.spent())
                if stop is not None:
                    break
                started = lp.ports.clock.monotonic()
                step = self._iterate(task)
                if step.turn.stop is not None and not _ends_iteration(step.turn.stop):
                    stop = step.turn.stop
                    break
                stop = self._conclude(task, step, lp.ports.clock.monotonic() - started)
            return self._finish(stop or Stop("done", done_reason(lp)))
        except caps.CannotFund as exc:  # the planner's request: the budget cannot pay for it
            return self._finish(exc.stop)
        except PlanError as exc:
            return self._finish(Stop("error", str(exc), "plan_invalid"))
        except LooprunError as exc:
            return self._finish(Stop("error", str(exc), type(exc).__name__))

    def _iterate(self, task: PlannedTask) -> Step:
        """Act, observe, check the policy, judge: one iteration's findings and decision."""
        lp, st = self.loop, self.loop.state
        n = st.iterations + 1
        # what commands left in run.artifacts last iteration (kept already) is not this one's
        lp.ports.journal.fresh_artifacts()
        acted = self.act.act(task, n, self._context(task, st.last_facts))
        turn, cap = acted.turn, acted.turn.stop
        if cap is not None and not _ends_iteration(cap):
            return Step(turn, {}, (), NOTHING_FOUND, Decision("stop"), "")
        # A cap that tripped inside the turn still ends the iteration: the checks run once
        # on the real tree (they have their own timeouts) so the record says where things
        # stand, except at the wall clock, where running them would overrun the cap.
        if cap is not None and cap.code == "timeout":
            observations = {
                name: unobserved(spec, f"not run: {cap.reason}")
                for name, spec in lp.template.observe.items()
            }
        else:
            observations = self.observing.observe(self._context(task, {}))
        found = policy(lp, turn.refusals, task)
        judged = self._judge(task, acted, observations, found, cap)
        if judged[-1].kind == "done" and narrowed(observations) and not self._one_follows():
            # the run's done is decided on whole runs only: a narrow stage may end a task
            # that another follows, never the last (the whole suite runs before the end)
            observations = self.observing.observe(self._context(task, {}), whole=True)
            judged = self._judge(task, acted, observations, found, cap)
        exit_values, progress, feedback, decision = judged
        specs = lp.template.observe
        missing = (cannot_run(name, specs[name], obs) for name, obs in observations.items())
        unrunnable = next((why for why in missing if why), "") or self.act.cannot_run(n)
        return Step(
            turn,
            observations,
            exit_values,
            found,
            decision,
            feedback,
            progress,
            unrunnable,
            self.observing.edit,
        )

    def _one_follows(self) -> bool:
        """Whether a static plan has a task after the current one: one whose own done
        (or a later one's) is decided on whole runs before the run can end done. Never
        for sub-loops: their act step ends every task at once on a done."""
        lp = self.loop
        tasks = lp.state.tasks or []
        static = lp.template.plan.mode != "model" and lp.template.each_task is None
        return static and lp.state.task_index + 1 < len(tasks)

    def _judge(
        self,
        task: PlannedTask,
        acted: Any,
        observations: Mapping[str, Observation],
        found: Any,
        cap: Stop | None,
    ) -> tuple[Any, Any, str, Decision]:
        """Exit conditions, progress, feedback and the refine decision on one observation."""
        lp, st, turn = self.loop, self.loop.state, acted.turn
        facts = {
            **self._context(task, {k: o.to_facts() for k, o in observations.items()}),
            "policy": found.facts(),
            **acted.facts,
        }
        conditions = lp.template.exit + ((task.done_when,) if task.done_when is not None else ())
        exit_values = check_exit(conditions, facts, found.diff_violations)
        progress = st.progress.next(
            fingerprint(turn.actions, observations, [v for _, v in exit_values])
        )
        failed = [src for src, ok in exit_values if not ok]
        facts["progress"] = progress.facts()
        feedback = compose(observations, found.summary, failed)
        blocks = observer_blocks(observations)
        try:
            decision = judge(lp.template.refine, facts, exit_values, feedback, blocks)
        except LooprunError as exc:
            if cap is None:
                raise
            # the cap is the verdict; a rule that cannot be judged on these facts only
            # loses the record of what the refine tree would have done
            decision = Decision("retry", feedback, rule=f"(not judged: {exc})")
        decision = self.act.settle(decision, found)
        return exit_values, progress, feedback, decision

    def _conclude(self, task: PlannedTask, step: Step, duration_s: float) -> Stop | None:
        """Checkpoint, record and apply one iteration's decision; a Stop ends the run."""
        lp, st = self.loop, self.loop.state
        st.iterations += 1
        st.task_iteration += 1
        st.progress = step.progress
        st.last_facts = {k: o.to_facts() for k, o in step.observations.items()}
        st.last_tokens, st.last_cost_usd = step.turn.tokens, step.turn.cost_usd
        st.last_duration_s = duration_s
        st.rounds = [*st.rounds, step.turn.messages][-max(1, lp.template.context.recent_rounds) :]
        decision = step.decision
        # a cap inside the turn ends the run whatever the checks say: never success
        cap = step.turn.stop
        checked = cap is None or cap.code != "timeout"  # at the wall clock nothing ran
        if decision.kind != "done" and checked:
            st.last_failure = step.feedback
        sha = lp.ports.workspace.checkpoint(f"{lp.run_info.id}/{st.iterations}")
        # green: every observer ok and the tree within the act constraints (a rollback
        # to last_green must never restore a diff that breaks them)
        if all(o.ok for o in step.observations.values()) and not step.policy.diff_violations:
            st.last_green = sha
        st.previous, st.current = st.current, sha
        pending = [p for p in step.policy.pending_approvals if p not in st.approved]
        stop: Stop | None = cap
        if stop is not None:
            pass  # no approval, no refine action, no rollback: the changes stay as they are
        elif step.observer_edit:
            # the check's verdict is not about the model's tree: never let it pass
            stop = Stop("error", step.observer_edit, "observer_changed_tree")
        elif step.cannot_run and decision.kind != "done":
            # no edit makes a missing program appear: stop rather than retry
            stop = Stop("error", step.cannot_run, "observer_cannot_run")
        elif pending and not decision.stops:
            stop, decision = transitions.approve(lp, pending, decision)
        task_iteration = st.task_iteration  # a completed task resets it in apply
        if stop is None:
            stop = transitions.apply(lp, self.act, task, decision)
        if stop is None and decision.kind != "done":
            stop = transitions.stalled(lp)
        line = attempt_line(
            st.iterations,
            self.act.subject(task),
            step.turn.tools,
            step.observations,
            decision.kind if stop is None else stop.outcome,
        )
        st.attempts.append(line)
        if len(st.attempts) > ATTEMPTS_KEPT:  # state.json stays the same size however long
            st.attempts_earlier += len(st.attempts) - ATTEMPTS_KEPT
            del st.attempts[:-ATTEMPTS_KEPT]
        record_iteration(
            lp.ports.journal,
            st,
            task,
            step,
            decision,
            stop,
            intent=lp.inputs.get("intent", ""),
            limits=caps.limit_report(lp.limits, lp.spent(), st.progress.repeats),
            task_iteration=task_iteration,
        )
        # the progress line names what decided: the rule that fired, or the cap
        why = decision.fired() if stop is None or stop.code == "refine" else stop.code
        lp.ports.report(f"{line} ({why})" if why else line)
        lp.save()
        return stop

    # -- for the composition root -----------------------------------------------------------

    def finish_recorded(self, *, summary: bool, event: bool) -> RunResult:
        """The result of a run whose final state was saved (``state.stop``) but whose
        end a kill left partly unwritten: write what is missing, the ``run_finished``
        event (``event``) and ``summary.json`` (``summary``), never the state again."""
        assert self.loop.state.stop is not None
        stop = Stop(**self.loop.state.stop)
        return finish(self.loop, self.act, stop, save=False, event=event, summary=summary)

    def save(self) -> None:
        """Save the state now (a step outside the loop, such as the commit, changed it)."""
        self.loop.save()

    def _finish(self, stop: Stop) -> RunResult:
        return finish(self.loop, self.act, stop)

    def _context(self, task: PlannedTask, facts: Mapping[str, Any]) -> dict[str, Any]:
        return self.loop.context(task, facts, self.act.facts())


def _act_step(loop: Loop) -> ActStep:
    """The template says how the loop acts; sub-loops come from the composition root."""
    t = loop.template
    if t.each_task is not None:
        if loop.ports.subloops is None:
            raise UsageError(f"{t.source}: this template runs sub-loops; nothing here runs them")
        return loop.ports.subloops(loop)
    if t.act is not None and t.act.agent is not None:
        return AgentTurn(loop)
    return ToolTurn(loop)


def _ends_iteration(stop: Stop) -> bool:
    """A cap (tokens, cost, per-tool calls, wall clock) that trips inside an act turn ends
    the iteration, which is observed and recorded; other stops in a turn end the run."""
    return stop.outcome == "exhausted"


def run_loop(
    template: Template,
    ports: Ports,
    *,
    inputs: Mapping[str, Any],
    run: RunInfo,
    limits: Limits | None = None,
    state: LoopState | None = None,
) -> RunResult:
    """Run one template in one workspace with a budget (an outer loop's share, or its own)."""
    return Engine(template, ports, inputs=inputs, run=run, limits=limits, state=state).run()


def with_iterations(limits: Limits, max_iterations: int | None) -> Limits:
    return limits if max_iterations is None else replace(limits, max_iterations=max_iterations)
