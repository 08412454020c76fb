"""The end of a run: its named stop, saved, recorded and summarised."""

from __future__ import annotations

from looprun.errors import LooprunError, one_line
from looprun.loop import limits as caps
from looprun.loop.act.step import ActStep
from looprun.loop.baseline import still_failing
from looprun.loop.core import Loop
from looprun.loop.outcome import RunResult, Stop, TaskResult, UsageTotals

DIFF_CAP = 20_000


def finish(
    loop: Loop,
    act: ActStep,
    stop: Stop,
    *,
    save: bool = True,
    event: bool = True,
    summary: bool = True,
) -> RunResult:
    """Save the stop with the state, then write the ``run_finished`` event (``event``) and
    ``summary.json`` (``summary``); a run whose end a kill left half-written redoes only
    those (``save=False``)."""
    st, ports = loop.state, loop.ports
    st.stop = stop.to_dict()
    if save:
        loop.save()
    ws = ports.workspace
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
        tasks=_task_results(loop, stop),
        run_id=loop.run_info.id,
        run_dir=loop.run_info.dir,
        usage=UsageTotals(st.prompt_tokens, st.completion_tokens, st.cost_usd),
        duration_s=loop.elapsed(),
        last_failure=st.last_failure,
        diff_stat=changed,
        pending_approvals=tuple((st.pending or {}).get("paths", ())),
        diff=diff,
        subloops=act.tree(),
        agent=dict(st.agent_totals),
        still_failing=still_failing(st.baseline, st.last_facts),
        heldout=dict(st.heldout),
    )
    if event:
        ports.journal.event(
            "run_finished",
            **stop.to_dict(),
            iterations=st.iterations,
            limits=caps.limit_report(loop.limits, loop.spent(), st.progress.repeats),
        )
    if summary:
        ports.journal.save_summary(result.summary())
    ports.report(
        f"→ {stop.outcome} after {st.iterations} iteration(s): {one_line(stop.reason)}"
        f" [{result.usage.describe()}]"
    )
    return result


def done_reason(loop: Loop) -> str:
    n = len(loop.state.tasks or [])
    return "exit conditions hold" + (f" for all {n} tasks" if n > 1 else "")


def _task_results(loop: Loop, stop: Stop) -> tuple[TaskResult, ...]:
    st = loop.state
    out = [TaskResult(**r) for r in st.task_results]
    for i, task in enumerate((st.tasks or [])[st.task_index :]):
        if i == 0 and stop.outcome != "done":
            out.append(TaskResult(task.id, stop.outcome, st.task_iteration, stop.reason))
        else:
            out.append(TaskResult(task.id, "pending", 0))
    return tuple(out)
