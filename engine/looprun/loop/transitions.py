"""What a decision does to the run: next task, retry with feedback, roll back, replan,
ask a person, stop. The refine tree names the decision; this is the one place it acts.
"""

from __future__ import annotations

from looprun.errors import LooprunError
from looprun.loop import limits as caps
from looprun.loop.act.step import ActStep
from looprun.loop.baseline import COMPARISONS, slim
from looprun.loop.core import Loop
from looprun.loop.heldout import ask_for_variants
from looprun.loop.outcome import Stop
from looprun.loop.plan import PlanError, PlannedTask
from looprun.loop.refine import Decision


def apply(loop: Loop, act: ActStep, task: PlannedTask, d: Decision) -> Stop | None:
    """Act on ``d``; the act step first gets its own say (an outer loop's done is every
    task's). A Stop ends the run."""
    handled, stop = act.apply(task, d)
    if handled:
        return stop
    st, ws = loop.state, loop.ports.workspace
    if d.kind == "done":
        _task_done(loop, act, task, d)
    elif d.kind in ("retry", "rollback"):
        st.feedback = d.message
        if d.kind == "rollback":
            target = {"base": st.base, "previous": st.previous}.get(d.target or "", st.last_green)
            ws.restore(target)
            st.current = target
            st.feedback = f"The working tree was rolled back ({d.target}).\n{d.message}"
    elif d.kind == "replan":
        return replan(loop, d)
    elif d.kind == "escalate":
        return Stop("escalated", d.message, "refine")
    elif d.kind == "abort":
        return Stop("aborted", d.message, "refine")
    return None


def _task_done(loop: Loop, act: ActStep, task: PlannedTask, d: Decision) -> None:
    st, names = loop.state, loop.template.observe
    st.task_results.append(
        {"id": task.id, "outcome": "done", "iterations": st.task_iteration, "reason": d.message}
    )
    loop.ports.journal.event("task_done", task=task.id, iterations=st.task_iteration)
    ctx = loop.context(task, st.last_facts, act.facts())
    st.done_facts = {
        **st.done_facts,
        task.id: {
            **{name: slim(st.last_facts.get(name) or ctx[name]) for name in names},
            "baseline": {
                name: {k: ctx["baseline"][name][k] for k in COMPARISONS} for name in names
            },
        },
    }
    # the task's tests are final now: their held-out variants are asked for on its tree
    ask_for_variants(loop, task, ctx)
    st.task_index += 1
    st.task_iteration, st.task_attempt, st.feedback, st.rounds = 0, 1, "", []
    st.task_start = st.current


def replan(loop: Loop, d: Decision) -> Stop | None:
    """A model plan is made again for what is left; a static task restarts from where it
    began. A Stop (not an exception): the iteration that asked is still recorded."""
    st = loop.state
    if loop.template.plan.mode == "model":
        assert st.tasks is not None
        done = [r["id"] for r in st.task_results]
        try:
            fresh = loop.plan(st.tasks[st.task_index :], done, d.message)
        except PlanError as exc:
            return Stop("error", str(exc), "plan_invalid")
        except caps.CannotFund as exc:
            return exc.stop
        except LooprunError as exc:
            return Stop("error", str(exc), type(exc).__name__)
        st.tasks = st.tasks[: st.task_index] + fresh
        st.task_iteration = 0
    else:
        loop.ports.workspace.restore(st.task_start)
        st.current = st.task_start
        st.task_attempt += 1
    st.rounds, st.feedback = [], d.message
    return None


def approve(loop: Loop, paths: list[str], d: Decision) -> tuple[Stop | None, Decision]:
    """Ask a person about changes under ``approve`` paths; nobody to ask escalates."""
    st = loop.state
    answer = loop.ports.approver.ask(paths, loop.ports.workspace.diff(st.base))
    loop.ports.journal.event("approval", paths=paths, answer=answer)
    if answer is None:
        st.pending = {
            "paths": paths,
            "decision": d.to_dict() | {"kind": d.kind},
            "previous": st.previous,
        }
        return Stop("escalated", "approval needed for " + ", ".join(paths), "approval"), d
    return None, resolve_approval(loop, answer, d, paths)


def resolve_approval(
    loop: Loop, approve: bool, d: Decision | None = None, paths: list[str] | None = None
) -> Decision:
    """Apply a person's answer; with ``d`` None it comes from a resumed run's pending record,
    and ``paths`` (the paths asked about) default to that record's."""
    st = loop.state
    pending = st.pending or {}
    if d is None:
        rec = pending["decision"]
        d = Decision(rec["kind"], rec.get("message", ""), rec.get("target"), rec.get("rule", ""))
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


def resume_approval(loop: Loop, act: ActStep, approve: bool) -> Stop | None:
    """A resumed run's pending approval, answered on the command line."""
    task = loop.task()
    paths = list((loop.state.pending or {}).get("paths") or [])
    decision = resolve_approval(loop, approve)
    # the person's answer is part of the record, like the question
    loop.ports.journal.event("approval", paths=paths, answer=approve)
    stop = apply(loop, act, task, decision) if task is not None else None
    loop.ports.report(f"approval: {'approved' if approve else 'rejected'} → {decision.kind}")
    loop.save()
    return stop


def stalled(loop: Loop) -> Stop | None:
    """The same actions and observations ``max_repeats`` times in a row: no progress."""
    cap = loop.limits.max_repeats
    reps = loop.state.progress.repeats
    if cap is not None and reps >= cap:
        return Stop(
            "stalled",
            f"no progress: the same actions and observations {reps} times in a row",
            "max_repeats",
        )
    return None
