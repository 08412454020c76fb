"""``looprun resume``: a run continued from its last completed step, with what it
recorded (checked against the command line) deciding what runs."""

from __future__ import annotations

import os
from typing import Any

from looprun.errors import UsageError
from looprun.journal import recorded, sealed
from looprun.journal.recorded import ResumeChoices
from looprun.journal.runs import run_status
from looprun.journal.writer import RunJournal
from looprun.loop.inputs import build_inputs
from looprun.loop.state import LoopState
from looprun.run.drive import drive, err
from looprun.run.executors import (
    RemoteExecutors,
    executor_factory,
    executor_spec,
)
from looprun.run.models import ModelEvents, resolve_models
from looprun.run.runner import (
    bind_numbers,
    check_sandbox,
    load,
    recorded_stack,
    repository,
    save_invocation,
)
from looprun.run.subrun import local_executor
from looprun.run.timing import RunTimer
from looprun.run.workdir import workdir_of
from looprun.template import slots
from looprun.template.deps import recording
from looprun.tracing.config import open_trace
from looprun.workspace.lock import RunLock


def resume_from_cli(
    *,
    run_id: str,
    workdir: str | None,
    approve: bool,
    reject: bool,
    as_json: bool,
    choices: ResumeChoices | None = None,
    remote: RemoteExecutors | None = None,
    trace: Any = None,
) -> int:
    """``looprun resume RUN_ID``: continue from the last completed step, or write down
    what a kill left unwritten at the end (the summary, the ``--commit`` commit).

    The recorded ``run.json`` is checked against ``choices`` (the command line) first:
    see :mod:`looprun.journal.recorded`."""
    timer = RunTimer()  # first: what came before is the start-up
    choices = choices or ResumeChoices()
    if approve and reject:
        raise UsageError("--approve and --reject exclude each other")

    wd = workdir_of(workdir or ".")
    journal = RunJournal.open(wd, run_id)
    with RunLock(wd / ".looprun", journal.run_id), journal:
        status = run_status(journal.dir)  # the same reading `looprun runs` shows
        approval = True if approve else False if reject else None
        raw = status.state
        if raw is not None and raw.get("pending"):
            if approval is None:
                raise UsageError(
                    f"run {journal.run_id} waits for approval of "
                    f"{', '.join(raw['pending'].get('paths', []))}; "
                    "resume with --approve or --reject"
                )
        elif not status.resume:
            raise UsageError(
                f"run {journal.run_id} already ended {status.outcome}: {status.reason}; "
                "nothing to resume"
            )
        elif approval is not None:
            raise UsageError(f"run {journal.run_id} is not waiting for an approval")
        git = repository(wd)
        invocation = recorded.against_seal(
            journal.load_invocation(),
            sealed.unseal(git, journal.run_id),
            journal.dir / "run.json",
            journal.run_id,
        )
        state = LoopState.from_dict(raw) if raw is not None else None
        if state is None:
            err(f"run {journal.run_id} was killed before its first step was saved; starting again")
            if journal.seq:  # what the killed start wrote is superseded by the new start
                journal.event(
                    "resumed",
                    iteration=0,
                    task_index=0,
                    superseded={"from_seq": 1, "to_seq": journal.seq},
                )
        elif state.pending is None and state.stop and state.stop.get("outcome") != "error":
            err(f"run {journal.run_id} ended {status.outcome}; left to do: {status.resume}")
        else:
            state.stop = None
            err(f"resuming run {journal.run_id} after iteration {state.iterations}")
        if choices.executor is not None:  # sub-loops may resume elsewhere than they started
            invocation = {**invocation, "executor": executor_spec(choices.executor)}
        if choices.sync_remote is not None:
            invocation = {**invocation, "sync_remote": choices.sync_remote}
        if choices.template is not None:
            invocation = {**invocation, "template": choices.template}
        named = choices.template is not None
        recorded.built_unchanged(invocation, wd, named, journal.run_id)
        choice = recorded_stack(invocation)
        with recording() as built, slots.chosen(choice):
            template = load(invocation["template"])
        files = recorded.built_from(built, wd)
        recorded.built_same(invocation, files, named, journal.run_id, wd)
        if named:  # the files as they are now, recorded for the next resume
            invocation = {**invocation, "template_files": files}
        invocation = recorded.template_unchanged(
            invocation, template.source, choices.template is not None, journal.run_id
        )
        invocation = {
            **invocation,
            "sandbox": recorded.sandbox_mode(
                invocation.get("sandbox"), template.sandbox.mode, choices.sandbox, journal.run_id
            ),
            "base_url": recorded.base_url(
                invocation.get("base_url"), choices.base_url, os.environ, journal.run_id
            ),
        }
        save_invocation(journal, git, invocation)  # the checked choices, sealed again
        err(recorded.shown(invocation))
        check_sandbox(template, invocation.get("sandbox"))
        inputs = build_inputs(
            template.inputs, invocation.get("intent"), invocation.get("sets") or {}
        )
        with slots.chosen(choice):
            template = bind_numbers(
                invocation["template"], template, invocation.get("sets") or {}, inputs
            )
        models = invocation.get("models") or {}
        events = ModelEvents()
        events.journal = journal
        act, plan, _ = resolve_models(
            template, models.get("act"), models.get("plan"), invocation.get("base_url"), events
        )
        traced = None if trace is None else open_trace(trace, journal.redact, template.name)
        try:
            return drive(
                template,
                wd,
                journal,
                inputs,
                invocation,
                act,
                plan,
                as_json=as_json,
                state=state,
                approval=approval,
                events=events,
                status=status,
                trace=traced,
                timer=timer,
                # sub-loops may resume elsewhere than they started; only an outer loop has any
                executor=(
                    executor_factory(invocation, remote, warm=True)
                    if template.each_task is not None
                    else local_executor
                ),
            )
        finally:
            if traced is not None:
                traced.close()
