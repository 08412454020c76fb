"""The interpreter of one loop: plan → (act → observe → refine)* → outcome.

An iteration is one act turn, one observation of the real working tree by every
observer, and one decision. A task is complete only when its exit conditions hold on
those fresh observations; nothing the model says ends a loop. Every stop has a named
reason. The engine talks to the world only through ``Ports``, so an outer loop can run
it per task with its own workspace and budget share (``run_loop``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from looprun.errors import LooprunError
from looprun.loop import limits as caps
from looprun.loop.facts import NO_SUBLOOPS, loop_facts, unobserved
from looprun.loop.feedback import attempt_line, attempts_summary, compose
from looprun.loop.outcome import RunResult, Stop, TaskResult, UsageTotals
from looprun.loop.plan import PlanError, PlannedTask, model_plan, static_tasks
from looprun.loop.ports import Ports
from looprun.loop.preflight import cannot_run, preflight
from looprun.loop.progress import fingerprint
from looprun.loop.records import Step, record_iteration
from looprun.loop.refine import Decision, check_exit, judge
from looprun.loop.state import LoopState
from looprun.loop.turn import Turn, act_turn, record_reply
from looprun.models.base import Message
from looprun.observe.base import Observation
from looprun.template.model import Limits, Template

DEFAULT_SYSTEM = (
    "You are a careful software engineer working in a repository through tools. "
    "Make the change the task asks for; the engine checks your work by running real checks."
)
DIFF_CAP = 20_000


@dataclass(frozen=True)
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


class Engine:
    """Runs one template to an outcome; ``run`` is the loop, the rest are its steps."""

    def __init__(
        self,
        template: Template,
        ports: Ports,
        *,
        inputs: Mapping[str, Any],
        run: RunInfo,
        limits: Limits | None = None,
        state: LoopState | None = None,
    ):
        if template.act is None and template.each_task is None:
            raise LooprunError(f"{template.source}: template has no act section to run")
        self.t, self.ports, self.run_info = template, ports, run
        self.inputs = dict(inputs)
        self.limits = limits or template.limits
        self.state = state or LoopState()
        self._t0 = ports.clock.monotonic()
        self._elapsed0 = self.state.elapsed_s
        # -- sub-loops hook (issue 6): an outer template's act phase runs its sub-loops --
        self.outer: Any = None
        if template.each_task is not None:
            from looprun.loop.outer import OuterPhase

            self.outer = OuterPhase(self)
        # -- end sub-loops hook --

    # -- the loop ---------------------------------------------------------------------------

    def run(self, approval: bool | None = None) -> RunResult:
        """Run to an outcome; ``approval`` answers a resumed run's pending approval."""
        try:
            stop = self._start()
            if stop is not None:
                return self._finish(stop)
            if approval is not None and self.state.pending is not None:
                stop = self._resume_approval(approval)
                if stop is not None:
                    return self._finish(stop)
            while (task := self._task()) is not None:
                stop = caps.before_iteration(self.limits, self._spent())
                if stop is not None:
                    return self._finish(stop)
                started = self.ports.clock.monotonic()
                step = self._iterate(task)
                if step.turn.stop is not None and not _ends_iteration(step.turn.stop):
                    return self._finish(step.turn.stop)
                stop = self._conclude(task, step, self.ports.clock.monotonic() - started)
                if stop is not None:
                    return self._finish(stop)
            return self._finish(Stop("done", self._done_reason()))
        except caps.CannotFund as exc:  # the planner's request: the budget cannot pay for it
            return self._finish(exc.stop)
        except PlanError as exc:
            return self._finish(Stop("error", str(exc), "plan_invalid"))
        except LooprunError as exc:
            return self._finish(Stop("error", str(exc), type(exc).__name__))

    def _iterate(self, task: PlannedTask) -> Step:
        st = self.state
        n = st.iterations + 1
        ctx = self._context(task, st.last_facts)
        # sub-loops hook (issue 6): sub-loops instead of a model turn
        turn = (
            self.outer.act(task, n)
            if self.outer is not None
            else act_turn(
                self.ports,
                self.t.act,
                self.limits,
                st,
                self._pinned(ctx),  # type: ignore[arg-type]
                self._prompt(ctx),
                elapsed=self._elapsed,
                iteration=n,
            )
        )
        cap = turn.stop
        if cap is not None and not _ends_iteration(cap):
            return Step(turn, {}, (), {}, Decision("stop"), "")
        # A cap that tripped inside the turn still ends the iteration: the checks run once
        # on the real tree (they have their own timeouts) so the record says where things
        # stand, except at the wall clock, where running them would overrun the cap.
        if cap is not None and cap.code == "timeout":
            observations = {
                name: unobserved(spec, f"not run: {cap.reason}")
                for name, spec in self.t.observe.items()
            }
        else:
            observations = self._observe(task)
        policy = self._policy(turn)
        facts = {
            **self._context(task, {k: o.to_facts() for k, o in observations.items()}),
            "policy": policy,
        }
        exit_values = check_exit(self._exit_conditions(task), facts, policy["diff_violations"])
        progress = st.progress.next(
            fingerprint(turn.actions, observations, [v for _, v in exit_values])
        )
        failed = [src for src, ok in exit_values if not ok]
        facts["progress"] = progress.facts()
        feedback = compose(observations, policy["summary"], failed)
        try:
            decision = judge(self.t.refine, facts, exit_values, feedback)
        except LooprunError as exc:
            if cap is None:
                raise
            # the cap is the verdict; a rule that cannot be judged on these facts only
            # loses the record of what the refine tree would have done
            decision = Decision("retry", feedback, rule=f"(not judged: {exc})")
        unrunnable = next(
            (
                why
                for name, obs in observations.items()
                if (why := cannot_run(name, self.t.observe[name], obs))
            ),
            "",
        )
        return Step(
            turn, observations, exit_values, policy, decision, feedback, progress, unrunnable
        )

    # -- start, plan and finish -------------------------------------------------------------

    def _start(self) -> Stop | None:
        st, ws = self.state, self.ports.workspace
        for role, model in (("act", self.ports.model), ("plan", self.ports.plan_model)):
            if model is not None and role in st.model_positions and hasattr(model, "seek"):
                model.seek(st.model_positions[role])
        if st.tasks is not None:  # resuming: back to the last completed step
            ws.restore(st.current)
            # Events written after the saved state (a crash or signal between an event and
            # the state save) describe a step that is redone now: mark them superseded.
            seq = getattr(self.ports.journal, "seq", None)
            superseded = (
                {"superseded": {"from_seq": st.journal_seq + 1, "to_seq": seq}}
                if isinstance(seq, int) and seq > st.journal_seq
                else {}
            )
            self.ports.journal.event(
                "resumed", iteration=st.iterations, task_index=st.task_index, **superseded
            )
            return self._preflight()
        st.base = st.current = st.previous = st.task_start = ws.base()
        st.last_green = st.base
        self.ports.journal.event(
            "run_started",
            template=self.t.name,
            source=self.t.source,
            intent=self.inputs.get("intent", ""),
            base=st.base,
            limits=caps.limit_report(self.limits, self._spent()),
        )
        stop = self._preflight()
        if stop is not None:
            return stop
        st.tasks = self._plan([], [])
        self._save()
        return None

    def _preflight(self) -> Stop | None:
        """An observer whose program cannot start stops the run before any model call."""
        task = self._task() or PlannedTask("", str(self.inputs.get("intent", "")))
        why = preflight(self.t.observe, self._context(task, {}), Path(self.run_info.workdir))
        return Stop("error", why, "observer_cannot_run") if why else None

    def _plan(
        self, remaining: list[PlannedTask], feedback_done: list[str], feedback: str = ""
    ) -> list[PlannedTask]:
        ctx = {
            "intent": self.inputs.get("intent", ""),
            "inputs": self.inputs,
            "run": self.run_info.facts(),
        }
        if self.t.plan.mode != "model":
            tasks = static_tasks(self.t, ctx)
        else:
            model = self.ports.plan_model or self.ports.model
            tasks = model_plan(
                model,
                self.t,
                ctx,
                remaining=remaining,
                done=feedback_done,
                feedback=feedback,
                timeout_s=caps.remaining_time(self.limits, self._spent()),
                on_reply=lambda msgs, reply: self._account(reply, "plan", msgs),
                output_cap=lambda msgs: caps.output_cap(
                    self.limits, self._spent(), caps.rough_estimate(msgs)
                ),
            )
        self.ports.journal.event("plan", mode=self.t.plan.mode, tasks=[t.to_dict() for t in tasks])
        self.ports.report(f"plan: {len(tasks)} task(s): {', '.join(t.id for t in tasks)}")
        return tasks

    def _finish(self, stop: Stop) -> RunResult:
        st = self.state
        st.stop = stop.to_dict()
        self._save()
        ws = self.ports.workspace
        try:
            changed = tuple(ws.changed_files(st.base)) if st.base else ()
            diff = ws.diff(st.base) if st.base and stop.outcome != "done" else ""
        except LooprunError:
            changed, diff = (), ""
        if len(diff) > DIFF_CAP:
            diff = diff[:DIFF_CAP] + f"\n[... diff cut at {DIFF_CAP} characters ...]\n"
        result = RunResult(
            outcome=stop.outcome,
            reason=stop.reason,
            code=stop.code,
            iterations=st.iterations,
            tasks=self._task_results(stop),
            run_id=self.run_info.id,
            run_dir=self.run_info.dir,
            usage=UsageTotals(st.prompt_tokens, st.completion_tokens, st.cost_usd),
            duration_s=self._elapsed(),
            last_failure=st.last_failure,
            diff_stat=changed,
            pending_approvals=tuple((st.pending or {}).get("paths", ())),
            diff=diff,
            subloops=self.outer.tree() if self.outer is not None else (),  # issue 6
        )
        self.ports.journal.event(
            "run_finished",
            **stop.to_dict(),
            iterations=st.iterations,
            limits=caps.limit_report(self.limits, self._spent(), st.progress.repeats),
        )
        self.ports.journal.save_summary(result.summary())
        self.ports.report(
            f"→ {stop.outcome} after {st.iterations} iteration(s): {stop.reason}"
            f" [{result.usage.describe()}]"
        )
        return result

    def _task_results(self, stop: Stop) -> tuple[TaskResult, ...]:
        st = self.state
        out = [TaskResult(**r) for r in st.task_results]
        for i, task in enumerate((st.tasks or [])[st.task_index :]):
            if i == 0 and stop.outcome != "done":
                out.append(TaskResult(task.id, stop.outcome, st.task_iteration, stop.reason))
            else:
                out.append(TaskResult(task.id, "pending", 0))
        return tuple(out)

    def _done_reason(self) -> str:
        n = len(self.state.tasks or [])
        return "exit conditions hold" + (f" for all {n} tasks" if n > 1 else "")

    # -- after an iteration -----------------------------------------------------------------

    def _conclude(self, task: PlannedTask, step: Step, duration_s: float) -> Stop | None:
        """Checkpoint, record and apply one iteration's decision; a Stop ends the run."""
        st, ws = self.state, self.ports.workspace
        st.iterations += 1
        st.task_iteration += 1
        st.progress = step.progress
        st.last_facts = {k: o.to_facts() for k, o in step.observations.items()}
        st.last_tokens, st.last_cost_usd = step.turn.tokens, step.turn.cost_usd
        st.last_duration_s = duration_s
        st.rounds = [*st.rounds, step.turn.messages][-max(1, self.t.context.recent_rounds) :]
        decision = step.decision
        # a cap inside the turn ends the run whatever the checks say: never success
        cap = step.turn.stop
        checked = cap is None or cap.code != "timeout"  # at the wall clock nothing ran
        if decision.kind != "done" and checked:
            st.last_failure = step.feedback
        sha = ws.checkpoint(f"{self.run_info.id}/{st.iterations}")
        # green: every observer ok and the tree within the act constraints (a rollback
        # to last_green must never restore a diff that breaks them)
        if all(o.ok for o in step.observations.values()) and not step.policy.get("diff_violations"):
            st.last_green = sha
        st.previous, st.current = st.current, sha
        pending = [p for p in step.policy["pending_approvals"] if p not in st.approved]
        stop: Stop | None = cap
        if stop is not None:
            pass  # no approval, no refine action, no rollback: the changes stay as they are
        elif step.cannot_run and decision.kind != "done":
            # no edit makes a missing program appear: stop rather than retry
            stop = Stop("error", step.cannot_run, "observer_cannot_run")
        elif pending and not decision.stops:
            stop, decision = self._approve(pending, decision, step)
        task_iteration = st.task_iteration  # a completed task resets it in _apply
        if stop is None:
            stop = self._apply(task, decision)
        if stop is None and decision.kind != "done":
            stop = self._stalled()
        line = attempt_line(
            st.iterations,
            task.id if self.outer is None else "sub-loops",  # an outer turn runs every task
            step.turn.tools,
            step.observations,
            decision.kind if stop is None else stop.outcome,
        )
        st.attempts.append(line)
        self._record(task, step, decision, stop, task_iteration)
        # the progress line names what decided: the rule that fired, or the cap
        why = decision.fired() if stop is None or stop.code == "refine" else stop.code
        self.ports.report(f"{line} ({why})" if why else line)
        st.model_positions = self._positions()
        self._save()
        return stop

    def _apply(self, task: PlannedTask, d: Decision) -> Stop | None:
        if self.outer is not None:  # sub-loops hook (issue 6): done/replan of all tasks
            handled, outer_stop = self.outer.apply(task, d)
            if handled:
                return outer_stop
        st, ws = self.state, self.ports.workspace
        if d.kind == "done":
            st.task_results.append(
                {
                    "id": task.id,
                    "outcome": "done",
                    "iterations": st.task_iteration,
                    "reason": d.message,
                }
            )
            self.ports.journal.event("task_done", task=task.id, iterations=st.task_iteration)
            st.task_index += 1
            st.task_iteration, st.task_attempt, st.feedback, st.rounds = 0, 1, "", []
            st.task_start = st.current
        elif d.kind in ("retry", "rollback"):
            st.feedback = d.message
            if d.kind == "rollback":
                target = {"base": st.base, "previous": st.previous}.get(
                    d.target or "", st.last_green
                )
                ws.restore(target)
                st.current = target
                st.feedback = f"The working tree was rolled back ({d.target}).\n{d.message}"
        elif d.kind == "replan":
            return self._replan(task, d)
        elif d.kind == "escalate":
            return Stop("escalated", d.message, "refine")
        elif d.kind == "abort":
            return Stop("aborted", d.message, "refine")
        return None

    def _replan(self, task: PlannedTask, d: Decision) -> Stop | None:
        st = self.state
        if self.t.plan.mode == "model":
            assert st.tasks is not None
            done = [r["id"] for r in st.task_results]
            try:
                fresh = self._plan(st.tasks[st.task_index :], done, d.message)
            except PlanError as exc:
                return Stop("error", str(exc), "plan_invalid")
            # a stop here, not an exception: the iteration that asked for the replan is
            # still recorded and saved by _conclude
            except caps.CannotFund as exc:
                return exc.stop
            except LooprunError as exc:
                return Stop("error", str(exc), type(exc).__name__)
            st.tasks = st.tasks[: st.task_index] + fresh
            st.task_iteration = 0
        else:  # static: restart the current task from where it began
            self.ports.workspace.restore(st.task_start)
            st.current = st.task_start
            st.task_attempt += 1
        st.rounds, st.feedback = [], d.message
        return None

    def _approve(self, paths: list[str], d: Decision, step: Step) -> tuple[Stop | None, Decision]:
        st = self.state
        answer = self.ports.approver.ask(paths, self.ports.workspace.diff(st.base))
        self.ports.journal.event("approval", paths=paths, answer=answer)
        if answer is None:
            st.pending = {
                "paths": paths,
                "decision": d.to_dict() | {"kind": d.kind},
                "previous": st.previous,
            }
            return Stop("escalated", "approval needed for " + ", ".join(paths), "approval"), d
        return None, self.resolve_approval(answer, d, paths)

    def resolve_approval(
        self, approve: bool, d: Decision | None = None, paths: list[str] | None = None
    ) -> Decision:
        """Apply a person's answer; with ``d`` None it comes from a resumed run's pending record,
        and ``paths`` (the paths asked about) default to that record's."""
        st = self.state
        pending = st.pending or {}
        if d is None:
            rec = pending["decision"]
            d = Decision(
                rec["kind"], rec.get("message", ""), rec.get("target"), rec.get("rule", "")
            )
        if paths is None:
            paths = pending.get("paths") or []
        st.pending, st.stop = None, None
        if approve:
            st.approved = sorted({*st.approved, *paths})
            return d
        target = pending.get("previous") or st.previous
        return Decision(
            "rollback",
            "A person rejected the changes to "
            f"{', '.join(paths) or 'approval-gated paths'}; do not change them.",
            "previous" if target == st.previous else "base",
            "approval",
        )

    def _resume_approval(self, approve: bool) -> Stop | None:
        task = self._task()
        paths = list((self.state.pending or {}).get("paths") or [])
        decision = self.resolve_approval(approve)
        # the person's answer is part of the record, like the question
        self.ports.journal.event("approval", paths=paths, answer=approve)
        stop = self._apply(task, decision) if task is not None else None
        self.ports.report(f"approval: {'approved' if approve else 'rejected'} → {decision.kind}")
        self._save()
        return stop

    def _stalled(self) -> Stop | None:
        cap = self.limits.max_repeats
        reps = self.state.progress.repeats
        if cap is not None and reps >= cap:
            return Stop(
                "stalled",
                f"no progress: the same actions and observations {reps} times in a row",
                "max_repeats",
            )
        return None

    # -- facts, prompts, records ----------------------------------------------------------

    def _task(self) -> PlannedTask | None:
        tasks = self.state.tasks or []
        return tasks[self.state.task_index] if self.state.task_index < len(tasks) else None

    def _exit_conditions(self, task: PlannedTask) -> tuple[Any, ...]:
        return self.t.exit + ((task.done_when,) if task.done_when is not None else ())

    def _context(self, task: PlannedTask, facts: Mapping[str, Any]) -> dict[str, Any]:
        return loop_facts(
            self.t.observe,
            facts,
            task=task,
            state=self.state,
            inputs=self.inputs,
            budget=caps.budget_facts(self.limits, self._spent()),
            # sub-loops hook (issue 6)
            subloops=self.outer.facts() if self.outer is not None else NO_SUBLOOPS,
            run=self.run_info.facts(),
        )

    def _pinned(self, ctx: Mapping[str, Any]) -> list[Message]:
        act = self.t.act
        assert act is not None
        system = act.system.render(ctx).strip() if act.system is not None else DEFAULT_SYSTEM
        summary = attempts_summary(self.state.attempts)
        return [Message("system", system + ("\n\n" + summary if summary else ""))]

    def _prompt(self, ctx: Mapping[str, Any]) -> str:
        act = self.t.act
        assert act is not None
        text = act.prompt.render(ctx).strip()
        fb = self.state.feedback
        if fb and "feedback" not in act.prompt.use.names:
            text += f"\n\nFeedback from the last check:\n{fb}"
        return text

    def _policy(self, turn: Turn) -> dict[str, Any]:
        ws, st = self.ports.workspace, self.state
        diff = ws.diff(st.base)
        diff_items = [
            {"rule": v.rule, "message": v.message, "tool": v.tool, "detail": v.detail}
            for v in self.ports.guard.check_diff(diff)
        ]
        for item in diff_items:
            self.ports.journal.event("policy_violation", iteration=st.iterations + 1, **item)
        items = turn.refusals + diff_items
        lines = sum(
            1 for ln in diff.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))
        )
        return {
            "violations": len(items),
            "diff_violations": len(diff_items),
            "summary": "\n".join(f"- {i['tool']}: {i['message']}" for i in items),
            "items": items,
            "diff_lines": lines,
            "pending_approvals": self.ports.guard.needs_approval(ws.changed_files(st.base)),
        }

    def _observe(self, task: PlannedTask) -> dict[str, Observation]:
        st = self.state
        # `when`, `run` and `file` see the engine names as they stand before this
        # iteration's decision, and the fresh facts of the observers declared above.
        ctx = self._context(task, {})
        left = caps.remaining_time(self.limits, self._spent())
        deadline = None if left is None else self.ports.clock.monotonic() + left
        out: dict[str, Observation] = {}
        for name, spec in self.t.observe.items():
            try:
                out[name] = self.ports.observer.observe(spec, ctx, deadline=deadline, base=st.base)
            except LooprunError as exc:
                out[name] = replace(unobserved(spec, str(exc)), ran=True)
            ctx[name] = out[name].to_facts()
        return out

    def _record(
        self, task: PlannedTask, step: Step, d: Decision, stop: Stop | None, task_iteration: int
    ) -> None:
        record_iteration(
            self.ports.journal,
            self.state,
            task,
            step,
            d,
            stop,
            intent=self.inputs.get("intent", ""),
            limits=caps.limit_report(self.limits, self._spent(), self.state.progress.repeats),
            task_iteration=task_iteration,
        )

    def _account(self, reply: Any, role: str, messages: Any) -> None:
        record_reply(
            self.ports,
            self.state,
            reply,
            messages,
            iteration=self.state.iterations,
            role=role,
            model=reply.model,
        )

    def _positions(self) -> dict[str, int]:
        out = {}
        for role, model in (("act", self.ports.model), ("plan", self.ports.plan_model)):
            pos = getattr(model, "position", None)
            if isinstance(pos, int):
                out[role] = pos
        return out

    def _elapsed(self) -> float:
        return self._elapsed0 + (self.ports.clock.monotonic() - self._t0)

    def _spent(self) -> caps.Spent:
        return self.state.spent(self._elapsed())

    def _save(self) -> None:
        self.state.elapsed_s = self._elapsed()
        self.state.model_positions = self._positions()
        seq = getattr(self.ports.journal, "seq", None)
        if isinstance(seq, int):
            self.state.journal_seq = seq
        self.ports.journal.save_state(self.state.to_dict())


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
