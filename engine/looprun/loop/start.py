"""Before the first iteration: start or resume, preflight, baseline, plan.

A fresh run records where it starts, checks that every observer's program can start,
observes the untouched tree once (the ``baseline.*`` facts, and a stop when a check
cannot run on this repository at all) and plans. A resumed run goes back to its last
completed step and charges what a killed iteration spent.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from looprun.loop import limits as caps
from looprun.loop.act.step import ActStep
from looprun.loop.baseline import (
    param_files,
    parametrized,
    rerun_files,
    slim,
    unlisted_files,
    unstable_ids,
    unusable,
)
from looprun.loop.core import Loop
from looprun.loop.feedback import observation_line
from looprun.loop.observe_step import ObserveStep, node_id
from looprun.loop.outcome import Stop
from looprun.loop.plan import PlannedTask
from looprun.loop.preflight import cannot_run, preflight
from looprun.loop.records import obs_record
from looprun.observe.base import Observation


def start(loop: Loop, act: ActStep, observing: ObserveStep) -> Stop | None:
    """Start or resume the run; a Stop ends it before any iteration."""
    st, ports = loop.state, loop.ports
    for role, model in (("act", ports.model), ("plan", ports.plan_model)):
        if model is not None and role in st.model_positions:
            model.seek(st.model_positions[role])
    if st.tasks is not None:
        return _resume(loop, act, observing)
    _recover_usage(loop, 0, 0)  # a start killed before its first save (started again)
    observing.exclude_reports(loop.context(loop.first_task(), {}, act.facts()))
    ws = ports.workspace
    st.base = st.current = st.previous = st.task_start = ws.base()
    st.last_green = st.base
    said = ws.describe_base()
    if said:
        ports.report(f"start: {said}")
    ports.journal.event(
        "run_started",
        template=loop.template.name,
        source=loop.template.source,
        intent=loop.inputs.get("intent", ""),
        base=st.base,
        limits=caps.limit_report(loop.limits, loop.spent()),
        start=said,
        **ports.setup,
    )
    stop = check_programs(loop, act)
    if stop is None:
        stop = baseline(loop, act, observing)
    if stop is not None:
        return stop
    st.tasks = loop.plan([], [])
    loop.save()
    return None


def _resume(loop: Loop, act: ActStep, observing: ObserveStep) -> Stop | None:
    """Back to the last completed step: events written after the saved state (a crash or
    signal between an event and the state save) describe a step that is redone now."""
    st, ports = loop.state, loop.ports
    recovered = _recover_usage(loop, st.journal_seq, st.exchanges)
    task = loop.task() or loop.first_task()
    observing.exclude_reports(loop.context(task, {}, act.facts()))
    ports.workspace.restore(st.current)
    seq = ports.journal.seq
    superseded = (
        {"superseded": {"from_seq": st.journal_seq + 1, "to_seq": seq}}
        if seq > st.journal_seq
        else {}
    )
    ports.journal.event(
        "resumed",
        iteration=st.iterations,
        task_index=st.task_index,
        **superseded,
        **ports.setup,
        **recovered,
    )
    return check_programs(loop, act)


def check_programs(loop: Loop, act: ActStep) -> Stop | None:
    """An observer whose program cannot start stops the run before any model call."""
    task = loop.task() or PlannedTask("", str(loop.inputs.get("intent", "")))
    ctx = loop.context(task, {}, act.facts())
    why = preflight(loop.template.observe, ctx, Path(loop.run_info.workdir))
    return Stop("error", why, "observer_cannot_run") if why else None


def baseline(loop: Loop, act: ActStep, observing: ObserveStep) -> Stop | None:
    """Observe the starting tree once, before any model call. Only the observers' own
    timeouts bound it, and its time does not count against the run's ``timeout``."""
    st, ports, specs = loop.state, loop.ports, loop.template.observe
    started = ports.clock.monotonic()
    ports.journal.fresh_artifacts()
    task = loop.first_task()
    observations = observing.observe(loop.context(task, {}, act.facts()), bounded=False)
    st.baseline = {name: slim(o.to_facts()) for name, o in observations.items()}
    unstable = _unstable(loop, act, observing, task, observations) if not observing.edit else {}
    for name, ids in unstable.items():
        st.baseline[name]["unstable"] = ids
    loop.t0 += ports.clock.monotonic() - started
    lines = {name: observation_line(name, o) for name, o in observations.items()}
    said = {n: ids[:50] for n, ids in unstable.items() if ids}
    ports.journal.event("baseline", observers=lines, **({"unstable": said} if said else {}))
    ports.journal.save_observation(
        0,
        {
            "iteration": 0,
            "baseline": True,
            "observers": {n: obs_record(o) for n, o in observations.items()},
        },
    )
    ports.report("baseline: " + ("; ".join(lines.values()) or "no observers"))
    if observing.edit:
        return Stop("error", observing.edit, "observer_changed_tree")
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


def _unstable(
    loop: Loop,
    act: ActStep,
    observing: ObserveStep,
    task: PlannedTask,
    observations: Mapping[str, Observation],
) -> dict[str, list[str]]:
    """Run each observer whose baseline has parametrized test ids once more: the ids
    the two runs of the same tree disagree on are unstable (parameters drawn from a
    set follow its hash order), so a later run not showing them is no vanished test.
    The check's stack reads the files that hold such ids first: where every parameter is
    a literal, nothing runs again; a staged observer runs only the files it cannot vouch
    for the second time. Where the stack can list the ids without running a test, it
    lists them in another process first, and only the files holding an id of the
    baseline's that the list does not name run again: a list is never taken as a run
    (what a collection names may differ from what runs), so it can only spare a second
    run of files whose every id it names as the baseline did, never mark an id unstable;
    a list that cannot be read leaves the second run as it was."""
    ctx = {
        **loop.context(task, {}, act.facts()),
        **{n: o.to_facts() for n, o in observations.items()},
    }
    out: dict[str, list[str]] = {}
    for name, spec in loop.template.observe.items():
        facts = ctx[name]
        if spec.run is None or not observations[name].ran or not parametrized(facts):
            continue
        held = param_files(facts)
        varying = loop.ports.observer.varying_params(spec, held) if held else None
        if varying == ():
            continue  # literals only: every id is the same on every run
        files = rerun_files(facts, held if varying is None else varying) if spec.narrow else ()
        if not all(node_id(f) for f in files):
            files = ()  # a file the command may not be given: the whole command again
        listed = observing.listed(name, spec, ctx, select=files)
        if listed is not None:
            moved = unlisted_files(facts, listed, within=files)
            if not moved:
                out[name] = []  # every id named alike by another process
                continue
            files = rerun_files(facts, moved) if spec.narrow else ()
            if not all(node_id(f) for f in files):
                files = ()
        again = observing.again(name, spec, ctx, select=files)
        if again is not None and again.error is None:
            out[name] = unstable_ids(facts, again.to_facts(), within=files)
    return out


def _recover_usage(loop: Loop, journal_seq: int, exchanges: int) -> dict[str, Any]:
    """Charge what the model calls after the saved state cost (a killed iteration was
    paid for: its exchanges are recorded) and the time it ran, so usage, caps and
    ``duration_s`` hold them after a resume."""
    if exchanges < 0:
        return {}
    u = loop.ports.journal.unsaved_usage(journal_seq, exchanges)
    if not (u.prompt_tokens or u.completion_tokens or u.cost_usd or u.seconds):
        return {}
    st = loop.state
    st.prompt_tokens += u.prompt_tokens
    st.completion_tokens += u.completion_tokens
    st.cost_usd += u.cost_usd
    st.elapsed_s += u.seconds
    loop.elapsed0 += u.seconds
    return {
        "recovered": {
            "prompt_tokens": u.prompt_tokens,
            "completion_tokens": u.completion_tokens,
            "cost_usd": round(u.cost_usd, 6),
            "seconds": round(u.seconds, 3),
        }
    }
