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

from looprun.errors import LooprunError, one_line
from looprun.loop import limits as caps
from looprun.loop.agent import AgentReport, agent_turn
from looprun.loop.baseline import (
    COMPARISONS,
    only_new_findings,
    parametrized,
    slim,
    still_failing,
    unstable_ids,
    unusable,
)
from looprun.loop.facts import NO_SUBLOOPS, loop_facts, unobserved
from looprun.loop.feedback import (
    ATTEMPTS_KEPT,
    attempt_line,
    attempts_summary,
    compose,
    observation_line,
    observer_blocks,
)
from looprun.loop.outcome import RunResult, Stop, TaskResult, UsageTotals
from looprun.loop.plan import PlanError, PlannedTask, model_plan, rendered_globs, static_tasks
from looprun.loop.ports import Ports
from looprun.loop.preflight import cannot_run, preflight
from looprun.loop.progress import fingerprint
from looprun.loop.records import Step, obs_record, record_iteration
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
        invocation: Mapping[str, Any] | None = None,
    ):
        if template.act is None and template.each_task is None:
            raise LooprunError(f"{template.source}: template has no act section to run")
        self.t, self.ports, self.run_info = template, ports, run
        self.inputs = dict(inputs)
        # how the run was invoked, as checked when it started: what sub-loops are handed
        # (never run.json read again, which a command may have rewritten meanwhile)
        self.invocation: dict[str, Any] = dict(invocation or {})
        self.limits = limits or template.limits
        self.state = state or LoopState()
        self._t0 = ports.clock.monotonic()
        self._elapsed0 = self.state.elapsed_s
        # read-only globs for the whole run (act.constraints.protect), rendered once
        protect = template.act.constraints.protect if template.act is not None else None
        goal_ctx = {"intent": self.inputs.get("intent", ""), "inputs": self.inputs}
        self.run_protect = rendered_globs(protect.paths if protect else (), goal_ctx)
        self.run_protect_doctests = bool(protect and protect.doctests)
        self.run_protect_new = rendered_globs(protect.allow_new if protect else (), goal_ctx)
        # forbidden patterns scoped by path glob, their globs rendered once like protect's
        scoped = template.act.constraints.scoped_patterns if template.act is not None else ()
        self.run_scoped = tuple(p.render(goal_ctx) for p in scoped)
        self._observer_edit = ""  # an observer changed the tree during the last observation
        self._observer_made: set[str] = set()  # files observers created (their caches)
        # -- sub-loops hook (issue 6): an outer template's act phase runs its sub-loops --
        self.outer: Any = None
        if template.each_task is not None:
            from looprun.run.subloops import OuterPhase

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
        # what commands left in run.artifacts last iteration (kept already) is not this one's
        self.ports.journal.fresh_artifacts()
        ctx = self._context(task, st.last_facts)
        report: AgentReport | None = None
        # sub-loops hook (issue 6): sub-loops instead of a model turn
        if self.t.act is not None and self.t.act.agent is not None:
            turn, report = agent_turn(
                self.ports,
                self.t.act,
                self.limits,
                st,
                self._pinned(ctx)[0].content,
                self._prompt(ctx),
                task_id=task.id,
                elapsed=self._elapsed,
                iteration=n,
            )
        elif self.outer is not None:
            turn = self.outer.act(task, n)
        else:
            turn = act_turn(
                self.ports,
                self.t.act,
                self.limits,
                st,
                self._pinned(ctx),  # type: ignore[arg-type]
                self._prompt(ctx),
                elapsed=self._elapsed,
                iteration=n,
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
        policy = self._policy(turn, task)
        facts = {
            **self._context(task, {k: o.to_facts() for k, o in observations.items()}),
            "policy": policy,
        }
        if report is not None:
            facts["agent"] = report.facts()
        exit_values = check_exit(self._exit_conditions(task), facts, policy["diff_violations"])
        progress = st.progress.next(
            fingerprint(turn.actions, observations, [v for _, v in exit_values])
        )
        failed = [src for src, ok in exit_values if not ok]
        facts["progress"] = progress.facts()
        feedback = compose(observations, policy["summary"], failed)
        blocks = observer_blocks(observations)
        try:
            decision = judge(self.t.refine, facts, exit_values, feedback, blocks)
        except LooprunError as exc:
            if cap is None:
                raise
            # the cap is the verdict; a rule that cannot be judged on these facts only
            # loses the record of what the refine tree would have done
            decision = Decision("retry", feedback, rule=f"(not judged: {exc})")
        # an agent's turn that broke the policy is undone, whatever the refine tree says
        if report is not None and policy["diff_violations"] and decision.kind == "retry":
            decision = Decision(
                "rollback",
                "Your last turn broke a rule of this template and was undone:\n"
                + policy["summary"],
                "previous",
                "(act.agent: a policy violation in the diff rolls the turn back)",
            )
        unrunnable = next(
            (
                why
                for name, obs in observations.items()
                if (why := cannot_run(name, self.t.observe[name], obs))
            ),
            "",
        )
        if not unrunnable and self.outer is not None:  # sub-loops hook (issue 6)
            unrunnable = self.outer.cannot_run(n)
        return Step(
            turn,
            observations,
            exit_values,
            policy,
            decision,
            feedback,
            progress,
            unrunnable,
            self._observer_edit,
        )

    # -- start, plan and finish -------------------------------------------------------------

    def _start(self) -> Stop | None:
        st, ws = self.state, self.ports.workspace
        for role, model in (("act", self.ports.model), ("plan", self.ports.plan_model)):
            if model is not None and role in st.model_positions and hasattr(model, "seek"):
                model.seek(st.model_positions[role])
        if st.tasks is not None:  # resuming: back to the last completed step
            recovered = self._recover_usage(st.journal_seq, st.exchanges)
            self._exclude_reports(self._task() or self._first_task())
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
                "resumed",
                iteration=st.iterations,
                task_index=st.task_index,
                **superseded,
                **self.ports.setup,
                **recovered,
            )
            return self._preflight()
        self._recover_usage(0, 0)  # a start killed before its first save (started again)
        self._exclude_reports(self._first_task())
        st.base = st.current = st.previous = st.task_start = ws.base()
        st.last_green = st.base
        said = ws.describe_base()
        if said:
            self.ports.report(f"start: {said}")
        self.ports.journal.event(
            "run_started",
            template=self.t.name,
            source=self.t.source,
            intent=self.inputs.get("intent", ""),
            base=st.base,
            limits=caps.limit_report(self.limits, self._spent()),
            start=said,
            **self.ports.setup,
        )
        stop = self._preflight()
        if stop is None:
            stop = self._baseline()
        if stop is not None:
            return stop
        st.tasks = self._plan([], [])
        self._save()
        return None

    def _first_task(self) -> PlannedTask:
        """The task the baseline and the preflight are rendered for: the first static task
        (a model's plan is not made yet: the intent stands in for it)."""
        if self.t.plan.mode != "model":
            ctx = {"intent": self.inputs.get("intent", ""), "inputs": self.inputs}
            tasks = static_tasks(self.t, {**ctx, "run": self.run_info.facts()})
            if tasks:
                return tasks[0]
        return PlannedTask("", str(self.inputs.get("intent", "")))

    def _baseline(self) -> Stop | None:
        """Observe the starting tree once, before any model call: ``baseline.*`` facts,
        and a stop when a check cannot run on this repository at all."""
        st = self.state
        # The baseline runs before the loop: only the observers' own timeouts bound it, and
        # its time does not count against the run's `timeout`.
        started = self.ports.clock.monotonic()
        self.ports.journal.fresh_artifacts()
        task = self._first_task()
        observations = self._observe(task, bounded=False)
        st.baseline = {name: slim(o.to_facts()) for name, o in observations.items()}
        unstable = self._unstable_ids(task, observations) if not self._observer_edit else {}
        for name, ids in unstable.items():
            st.baseline[name]["unstable"] = ids
        self._t0 += self.ports.clock.monotonic() - started
        lines = {name: observation_line(name, o) for name, o in observations.items()}
        said = {n: ids[:50] for n, ids in unstable.items() if ids}
        extra = {"unstable": said} if said else {}
        self.ports.journal.event("baseline", observers=lines, **extra)
        self.ports.journal.save_observation(
            0,
            {
                "iteration": 0,
                "baseline": True,
                "observers": {n: obs_record(o) for n, o in observations.items()},
            },
        )
        self.ports.report("baseline: " + ("; ".join(lines.values()) or "no observers"))
        if self._observer_edit:
            return Stop("error", self._observer_edit, "observer_changed_tree")
        specs = self.t.observe
        why = next((w for n, o in observations.items() if (w := cannot_run(n, specs[n], o))), "")
        if why:
            return Stop("error", why, "observer_cannot_run")
        why = next((w for n, o in observations.items() if (w := unusable(n, specs[n], o))), "")
        if why:
            return Stop(
                "error",
                why + "\nNo model was called. Make the checks run on this repository "
                "(install what they need, generate missing files), then start the run again.",
                "baseline_unusable",
            )
        return None

    def _unstable_ids(
        self, task: PlannedTask, observations: Mapping[str, Observation]
    ) -> dict[str, list[str]]:
        """Run each observer whose baseline has parametrized test ids once more: the ids
        the two runs of the same tree disagree on are unstable (parameters drawn from a
        set follow its hash order), so a later run not showing them is no vanished test."""
        ctx = {**self._context(task, {}), **{n: o.to_facts() for n, o in observations.items()}}
        out: dict[str, list[str]] = {}
        ws = self.ports.workspace
        for name, spec in self.t.observe.items():
            facts = ctx[name]
            if spec.run is None or not observations[name].ran or not parametrized(facts):
                continue
            before = ws.snapshot()
            try:
                again = self.ports.observer.observe(spec, ctx, deadline=None, base=self.state.base)
            except LooprunError:
                continue
            again, _ = self._edits_by(name, spec, again, before)
            if again.error is None:
                out[name] = unstable_ids(facts, again.to_facts())
        return out

    def _exclude_reports(self, task: PlannedTask) -> None:
        """Observers' report files are never part of the run's changes, wherever they are."""
        ctx = self._context(task, {})
        paths = []
        for spec in self.t.observe.values():
            if spec.file is None:
                continue
            try:
                paths.append(spec.file.render(ctx).strip())
            except LooprunError:
                continue  # not renderable yet: the observer will say why when it runs
        if paths:
            self.ports.workspace.exclude(paths)

    def _recover_usage(self, journal_seq: int, exchanges: int) -> dict[str, Any]:
        """Charge what the model calls after the saved state cost (a killed iteration was
        paid for: its exchanges are recorded) and the time it ran, so usage, caps and
        ``duration_s`` hold them after a resume."""
        unsaved = getattr(self.ports.journal, "unsaved_usage", None)
        if unsaved is None or exchanges < 0:
            return {}
        u = unsaved(journal_seq, exchanges)
        if not (u.prompt_tokens or u.completion_tokens or u.cost_usd or u.seconds):
            return {}
        st = self.state
        st.prompt_tokens += u.prompt_tokens
        st.completion_tokens += u.completion_tokens
        st.cost_usd += u.cost_usd
        st.elapsed_s += u.seconds
        self._elapsed0 += u.seconds
        return {
            "recovered": {
                "prompt_tokens": u.prompt_tokens,
                "completion_tokens": u.completion_tokens,
                "cost_usd": round(u.cost_usd, 6),
                "seconds": round(u.seconds, 3),
            }
        }

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

    def finish_recorded(self, *, summary: bool, event: bool) -> RunResult:
        """The result of a run whose final state was saved (``state.stop``) but whose
        end a kill left partly unwritten: write what is missing, the ``run_finished``
        event (``event``) and ``summary.json`` (``summary``), never the state again."""
        assert self.state.stop is not None
        stop = Stop(**self.state.stop)
        return self._finish(stop, save=False, event=event, summary=summary)

    def save(self) -> None:
        """Save the state now (a step outside the loop, such as the commit, changed it)."""
        self._save()

    def _finish(
        self, stop: Stop, *, save: bool = True, event: bool = True, summary: bool = True
    ) -> RunResult:
        st = self.state
        st.stop = stop.to_dict()
        if save:
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
            agent=dict(st.agent_totals),
            still_failing=still_failing(st.baseline, st.last_facts),
        )
        if event:
            self.ports.journal.event(
                "run_finished",
                **stop.to_dict(),
                iterations=st.iterations,
                limits=caps.limit_report(self.limits, self._spent(), st.progress.repeats),
            )
        if summary:
            self.ports.journal.save_summary(result.summary())
        self.ports.report(
            f"→ {stop.outcome} after {st.iterations} iteration(s): {one_line(stop.reason)}"
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
        elif step.observer_edit:
            # the check's verdict is not about the model's tree: never let it pass
            stop = Stop("error", step.observer_edit, "observer_changed_tree")
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
        if len(st.attempts) > ATTEMPTS_KEPT:  # state.json stays the same size however long
            st.attempts_earlier += len(st.attempts) - ATTEMPTS_KEPT
            del st.attempts[:-ATTEMPTS_KEPT]
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
            ctx = self._context(task, st.last_facts)
            st.done_facts = {
                **st.done_facts,
                task.id: {
                    **{name: slim(st.last_facts.get(name) or ctx[name]) for name in self.t.observe},
                    "baseline": {
                        name: {k: ctx["baseline"][name][k] for k in COMPARISONS}
                        for name in self.t.observe
                    },
                },
            }
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
        summary = attempts_summary(self.state.attempts, earlier=self.state.attempts_earlier)
        return [Message("system", system + ("\n\n" + summary if summary else ""))]

    def _prompt(self, ctx: Mapping[str, Any]) -> str:
        act = self.t.act
        assert act is not None
        text = act.prompt.render(ctx).strip()
        fb = self.state.feedback
        if fb and "feedback" not in act.prompt.use.names:
            text += f"\n\nFeedback from the last check:\n{fb}"
        return text

    def _protected(self, task: PlannedTask) -> list[Any]:
        """Changes to what the task (since it started) or the run (since its base) protects."""
        st, ws, found = self.state, self.ports.workspace, []
        task_rules = (task.protect, task.protect_doctests, task.protect_allow_new)
        run_rules = (self.run_protect, self.run_protect_doctests, self.run_protect_new)
        for since, (globs, doctests, new), scope in (
            (st.task_start, task_rules, f"in task {task.id}"),
            (st.base, run_rules, "in this run"),
        ):
            if since and (globs or doctests):
                changes = ws.file_changes(since, contents=doctests)
                found.extend(self.ports.guard.check_protected(changes, globs, doctests, scope, new))
        return found

    def _policy(self, turn: Turn, task: PlannedTask) -> dict[str, Any]:
        ws, st = self.ports.workspace, self.state
        diff = ws.diff(st.base)
        diff_items = [
            {"rule": v.rule, "message": v.message, "tool": v.tool, "detail": v.detail}
            for v in [
                *self.ports.guard.check_diff(diff),
                *self.ports.guard.check_patterns(diff, self.run_scoped),
                *self._protected(task),
            ]
        ]
        moved = ws.repository_changed()
        if moved:
            diff_items.append(
                {"rule": "repository.changed", "message": moved, "tool": "diff", "detail": ".git"}
            )
        for item in diff_items:
            self.ports.journal.event("policy_violation", iteration=st.iterations + 1, **item)
        items = turn.refusals + diff_items
        lines = sum(
            1 for ln in diff.split("\n") if ln[:1] in "+-" and not ln.startswith(("+++", "---"))
        )
        return {
            "violations": len(items),
            "diff_violations": len(diff_items),
            "summary": "\n".join(f"- {i['tool']}: {i['message']}" for i in items),
            "items": items,
            "diff_lines": lines,
            "pending_approvals": self.ports.guard.needs_approval(ws.changed_files(st.base)),
        }

    def _observe(self, task: PlannedTask, *, bounded: bool = True) -> dict[str, Observation]:
        st = self.state
        # `when`, `run` and `file` see the engine names as they stand before this
        # iteration's decision, and the fresh facts of the observers declared above.
        ctx = self._context(task, {})
        left = caps.remaining_time(self.limits, self._spent()) if bounded else None
        deadline = None if left is None else self.ports.clock.monotonic() + left
        self._exclude_reports(task)
        ws = self.ports.workspace
        self._observer_edit = ""
        before = ws.snapshot() if any(s.run is not None for s in self.t.observe.values()) else ""
        out: dict[str, Observation] = {}
        for name, spec in self.t.observe.items():
            try:
                out[name] = self.ports.observer.observe(spec, ctx, deadline=deadline, base=st.base)
            except LooprunError as exc:
                out[name] = replace(unobserved(spec, str(exc)), ran=True)
            except BaseException:
                held = spec.holdout is not None and spec.run is not None
                if held and ws.snapshot() != before:
                    # interrupted: what ran beside the held-out tests is undone all the same
                    ws.restore(before)
                raise
            if spec.run is not None and out[name].ran:
                out[name], before = self._edits_by(name, spec, out[name], before)
            if st.baseline is not None:  # the baseline itself is fed back whole
                out[name] = only_new_findings(out[name], st.baseline.get(name), spec)
            ctx[name] = out[name].to_facts()
        return out

    def _edits_by(
        self, name: str, spec: Any, obs: Observation, before: str
    ) -> tuple[Observation, str]:
        """An observer must not edit the tree it checks (``ruff`` with ``fix = true``):
        its edits to existing files are undone, and it is reported as its problem."""
        ws = self.ports.workspace
        now = ws.snapshot()
        if now == before:
            return obs, before
        changes = ws.file_changes(before, now)
        edited = [
            c
            for c in changes
            if c.status != "A" and c.path not in self._observer_made and not _is_cache(c.path)
        ]
        if spec.holdout is not None and changes:
            # what code ran beside the held-out tests wrote (a copy of them) never stays
            ws.restore(before)
            return obs, before
        self._observer_made |= {c.path for c in changes if c.status == "A"}
        if not edited:
            return obs, now  # files it created (caches) are left as they are
        ws.restore(before)
        paths = ", ".join(c.path for c in edited[:10]) + (" ..." if len(edited) > 10 else "")
        why = (
            f"observer {name!r} ({spec.location}) changed the working tree it checks "
            f"({paths}); its changes were undone. An observer must not edit files: run its "
            "tool in check-only mode (e.g. `ruff check --no-fix`, `black --check`), or "
            "remove the fixing option from the project's configuration"
        )
        if not self._observer_edit:
            self._observer_edit = why
        return replace(obs, ok=False, error=why, feedback=f"{why}\n{obs.feedback}"), before

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
        count = getattr(self.ports.journal, "exchange_count", None)
        if isinstance(count, int):
            self.state.exchanges = count
        self.ports.journal.save_state(self.state.to_dict())


# Caches the checks' own tools rewrite as they run (bytecode, pytest, coverage, linters):
# never an observer editing the code.
_CACHE_PARTS = frozenset(
    {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis", ".tox"}
)


def _is_cache(path: str) -> bool:
    parts = path.split("/")
    return bool(_CACHE_PARTS.intersection(parts[:-1])) or parts[-1].startswith(".coverage")


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
