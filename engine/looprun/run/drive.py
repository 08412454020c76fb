"""One run driven to its end, fresh or resumed: assembled, run, interrupted or
committed, its result printed. ``runner`` starts runs and ``resume`` continues them."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from looprun.errors import EXIT_ERROR, LooprunError
from looprun.journal.runs import RunStatus
from looprun.journal.writer import RunJournal
from looprun.loop.engine import Engine, with_iterations
from looprun.loop.outcome import RunResult
from looprun.loop.state import LoopState
from looprun.loop.verdict import left_failing, where_it_stands
from looprun.models.base import Model
from looprun.models.pricing import PriceTable
from looprun.run.executors import (
    ExecutorFactory,
)
from looprun.run.interrupt import record_interrupted, signals_ignored, sigterm_interrupts
from looprun.run.models import ModelEvents, price_warnings, roles_used
from looprun.run.session import Session, Wiring, assemble
from looprun.run.subrun import local_executor
from looprun.run.timing import RunTimer
from looprun.system.crashpoint import crash_point
from looprun.system.proc import secret_values
from looprun.system.redact import Redactor
from looprun.template.model import Template
from looprun.workspace.commit import CommitRefused, commit_message, commit_paths
from looprun.workspace.tree import Workspace


def err(line: str) -> None:
    click.echo(line, err=True)


def _interactive() -> bool:
    return sys.stdin.isatty() and sys.stderr.isatty()


def _emit(result: RunResult, as_json: bool, ws: Any = None, timer: RunTimer | None = None) -> int:
    if as_json:
        summary = result.summary()
        if timer is not None:  # only here: the run's record stays the same run to run
            summary["timing"] = timer.summary()
        click.echo(json.dumps(summary, indent=2))
    elif not result.finished:
        for line in where_it_stands(result, ws):
            err(line)
    if result.finished:  # on stderr with --json too: a green verdict names what it left
        for line in left_failing(result.still_failing):
            err("  " + line)
    return result.exit_code


def _commit_step(
    engine: Engine, ws: Any, journal: RunJournal, invocation: Mapping[str, Any], template: Template
) -> bool:
    """``--commit`` after a done run: a step of the run, recorded before and after, so a
    run killed anywhere in it gets its commit exactly once on ``looprun resume``; False
    when git or a hook refused the commit (a resume tries again).

    The intent (parent, message, paths) is saved in the state first; the ``commit``
    journal event and the commit's sha in the state follow it. A resumed step whose
    commit is already HEAD (made before the kill: on top of the recorded parent, with
    this run's ``Looprun-Run`` trailer) adopts it instead of committing again.
    """

    st = engine.state
    if st.commit is None:
        # Only what the run changed: the user's own uncommitted work stays uncommitted.
        changed = ws.changed_files(st.base or None)
        if not changed:
            st.commit = {"skipped": "nothing changed"}
            engine.save()
            err("nothing changed: no commit made")
            return True
        stop = st.stop or {}
        message = Redactor(secret_values()).text(
            commit_message(
                template.name,
                str(invocation.get("intent") or ""),
                journal.run_id,
                iterations=st.iterations,
                reason=str(stop.get("reason", "")),
            )
        )
        st.commit = {"parent": ws.git.head() or "", "message": message, "paths": changed}
        engine.save()
    rec = st.commit
    if rec.get("sha") or rec.get("skipped"):
        return True
    crash_point("commit.before")
    recorded = [
        e
        for e in journal.events()
        if e.get("event") == "commit" and e.get("parent") == rec["parent"]
    ]
    if recorded:  # made and journaled; only the state did not hear of it
        rec["sha"] = recorded[-1]["sha"]
        engine.save()
        return True
    sha = ws.made_commit(rec["parent"], journal.run_id)
    adopted = sha is not None
    if sha is None:
        try:
            sha = commit_paths(
                ws.workdir, rec["message"], rec["paths"], verify=not invocation.get("no_verify")
            )
        except CommitRefused as exc:
            err(f"looprun: {exc}")
            return False
    else:  # made before a kill: its index update may not have happened
        ws.reset_index(rec["paths"])
    crash_point("commit.before-event")
    journal.event(
        "commit", sha=sha, parent=rec["parent"], files=list(rec["paths"]), adopted=adopted
    )
    rec["sha"] = sha
    engine.save()
    err(f"committed {sha[:12]} to the current branch ({len(rec['paths'])} file(s))")
    return True


def drive(
    template: Template,
    workdir: Path,
    journal: RunJournal,
    inputs: Mapping[str, Any],
    invocation: Mapping[str, Any],
    act: Model,
    plan: Model,
    *,
    as_json: bool,
    state: LoopState | None,
    approval: bool | None,
    events: ModelEvents | None = None,
    status: RunStatus | None = None,
    executor: ExecutorFactory = local_executor,
    trace: Any = None,
    workspace: Workspace | None = None,
    timer: RunTimer | None = None,
) -> int:
    report = err
    wiring = Wiring(
        workspace=workspace,
        report=report,
        interactive=_interactive() and not as_json,
        base=state.base if state is not None and state.base else None,
        sandbox_mode=invocation.get("sandbox"),
        prices=_prices(events),
        inputs=inputs,
        executor=executor,
        trace=trace,
        timer=timer,
    )
    session = assemble(template, workdir, journal, act, plan, wiring)
    try:
        return _drive(
            session,
            workdir,
            journal,
            inputs,
            invocation,
            as_json=as_json,
            state=state,
            approval=approval,
            events=events,
            status=status,
            timer=timer,
        )
    finally:
        session.close()  # the MCP servers stop with the run, however it ends


def _drive(
    session: Session,
    workdir: Path,
    journal: RunJournal,
    inputs: Mapping[str, Any],
    invocation: Mapping[str, Any],
    *,
    as_json: bool,
    state: LoopState | None,
    approval: bool | None,
    events: ModelEvents | None,
    status: RunStatus | None,
    timer: RunTimer | None = None,
) -> int:
    report = err
    template = session.template
    ports, ws = session.ports, session.workspace
    model = (
        f"model {ports.model.ref}" if ports.model.ref else "no model: its sub-loops run agent CLIs"
    )
    err(f"looprun {template.name}: run {journal.run_id} in {workdir} ({model})")
    for lock in ws.clear_stale_locks(journal.run_id):  # we hold the run lock: theirs is dead
        note = f"removed {lock}, left behind by a run that was killed"
        err("note: " + note)
        journal.event("warning", message=note)
    limits = with_iterations(template.limits, invocation.get("max_iterations"))
    if events is not None:
        for warning in price_warnings(
            invocation.get("models") or {},
            events.config,
            limits.max_cost_usd,
            roles_used(template),
        ):
            err("warning: " + warning)
            journal.event("warning", message=warning)
    started, elapsed0 = time.monotonic(), state.elapsed_s if state is not None else 0.0
    engine = session.engine(inputs=inputs, limits=limits, state=state, invocation=invocation)
    commit = bool(invocation.get("commit"))
    if state is not None and state.stop is not None and status is not None:
        # the run has ended; a kill left only its summary or its commit to write down
        if timer is not None:
            timer.engine_started()
        result = engine.finish_recorded(
            summary=status.summary_missing, event=_unrecorded_end(journal)
        )
        if timer is not None:
            timer.engine_ended()
        committed = True
        if commit and result.finished:
            committed = _commit_step(engine, ws, journal, invocation, template)
        code = _emit(result, as_json, ws, timer)
        return code if committed else EXIT_ERROR
    try:
        with sigterm_interrupts():
            if timer is not None:
                timer.engine_started()
            result = engine.run(approval=approval)
            if timer is not None:
                timer.engine_ended()
    except KeyboardInterrupt as exc:
        with signals_ignored():  # a second Ctrl-C must not tear the record of the first
            result = record_interrupted(
                engine, ws, journal, exc, elapsed0 + time.monotonic() - started
            )
            report(f"→ interrupted after {result.iterations} iteration(s): {result.reason}")
        _step_summary(journal.dir)
        _emit(result, as_json, ws)
        return result.exit_code
    committed = True
    if commit and result.finished:
        committed = _commit_step(engine, ws, journal, invocation, template)
    _step_summary(journal.dir)
    code = _emit(result, as_json, ws, timer)
    return code if committed else EXIT_ERROR


def _step_summary(run_dir: Path) -> None:
    """In GitHub Actions, append the run's Markdown report to the job's summary page."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return
    from looprun.report import build_report, render  # heavy: only when a summary is written

    try:
        text = render(build_report(run_dir), "md")
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text + "\n")
    except (OSError, LooprunError) as exc:  # the run's outcome stands; say so and go on
        err(f"warning: could not append the report to GITHUB_STEP_SUMMARY ({path}): {exc}")


def _unrecorded_end(journal: RunJournal) -> bool:
    """The final state was saved, but its ``run_finished`` event was not written."""
    state = journal.load_state() or {}
    seq = int(state.get("journal_seq", 0))
    return not any(
        e.get("event") == "run_finished" and int(e.get("seq", 0)) > seq for e in journal.events()
    )


def _prices(events: ModelEvents | None) -> Any:

    return PriceTable(events.config.prices) if events is not None else None
