"""What a worker does with one sub-loop job: load, assemble, run (or resume), report.

Threads of this process run it through ``LocalExecutor`` (``local_executor``); a Ray
worker runs it on a clone of the repository (``looprun.remote``). Either way the sub-loop
is assembled like any run (``session.assemble``), with ports its outer loop can stop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from looprun.errors import LooprunError
from looprun.journal import recorded
from looprun.journal.writer import RunJournal
from looprun.loop.inputs import build_inputs
from looprun.loop.state import LoopState
from looprun.models.base import Model
from looprun.models.registry import resolve_model
from looprun.models.scripted import ScriptedModel
from looprun.run.executor import LocalExecutor, Report, Stopped, SubloopJob, SubloopResult
from looprun.run.models import NO_MODEL, ModelEvents, agent_role, needs_http_model
from looprun.run.session import Wiring, assemble
from looprun.run.stoppable import StoppableModel
from looprun.template import slots
from looprun.template.deps import recording
from looprun.template.loader import load_template
from looprun.template.model import Template
from looprun.template.slots import StackChoice
from looprun.tracing.config import TraceConfig, open_trace


def local_executor(parallel: int, report: Report) -> LocalExecutor:
    """Sub-loops on threads of this process; theirs run the same way."""
    return LocalExecutor(parallel, report, run_subloop)


def run_subloop(
    job: SubloopJob,
    stop: threading.Event,
    report: Report,
    *,
    after_save: Callable[[], None] | None = None,
) -> SubloopResult:
    """What a worker does with one job: load, wire the real ports, run (or resume).

    ``after_save`` runs after every saved state (each completed step): a remote worker
    publishes its checkpoint and journal there, and may raise ``Stopped`` to end the run.
    """

    def prefixed(line: str) -> None:
        report(f"[{job.task_id}] {line}")

    run_dir = Path(job.run_dir)

    try:
        template = _held_template(job)
        events = ModelEvents()  # the config file, and retries journaled in the sub-loop's run
        agent = template.act is not None and template.act.agent is not None
        if agent:  # its CLI's own model, named like at the top; not the outer's act model
            act = agent_role(template, job.cli_models.get("act"), events.config)
        elif not job.model and not needs_http_model(template):
            act = NO_MODEL  # a nested outer loop whose sub-loops all run agent CLIs
        else:
            act = _resolve(job, events)
        plan = act
        if (
            template.plan.mode == "model"
            and job.plan_model
            and (agent or job.plan_model != job.model)
        ):
            plan = _resolve(replace(job, model=job.plan_model), events)
        # an agent role is never called: the actor runs the turns, and stops with the rest
        model = act if agent else StoppableModel(act, stop)
        plan_model = model if plan is act else StoppableModel(plan, stop)
        run_dir.mkdir(parents=True, exist_ok=True)
        with RunJournal(run_dir, job.run_id) as opened:
            journal: Any = opened if after_save is None else _AfterSave(opened, after_save)
            events.journal = journal
            # a nested outer loop hands its sub-loops these (in memory; the file is a record)
            invocation = {
                "template": job.template,
                "models": {"act": job.model, "plan": job.plan_model or job.model},
                "cli_models": dict(job.cli_models),
                "base_url": job.base_url,
                "sandbox": job.sandbox,
                "template_files": job.template_files,
                "template_root": job.template_root,
            }
            journal.save_invocation(invocation)
            state = None
            raw = journal.load_state() if job.resume else None
            if raw is not None:
                state = LoopState.from_dict(raw)
                state.stop = None
            inputs = _typed_inputs(template, job.inputs)
            trace = None
            if job.trace:  # a child of the outer loop's iteration, in the same trace
                config = TraceConfig.from_dict(job.trace)
                trace = open_trace(config, opened.redact, template.name)
            wiring = Wiring(
                report=prefixed,
                base=job.commit,
                sandbox_mode=job.sandbox,
                inputs=inputs,
                held_out=job.held_out,
                executor=local_executor,
                script_key=job.script_key,
                stop=stop,
                trace=trace,
            )
            session = assemble(template, Path(job.workdir), journal, model, plan_model, wiring)
            ws = session.workspace
            if job.resume:  # the outer loop holds the run lock: these locks' owner is dead
                for lock in ws.clear_stale_locks(job.run_id):
                    prefixed(f"note: removed {lock}, left behind by a run that was killed")
            if job.resume and state is None:
                ws.restore(job.commit)  # redo from the start, never on top of half an edit
            try:
                result = session.engine(
                    inputs=inputs,
                    limits=_limits(template.limits, job.limits),
                    state=state,
                    invocation=invocation,
                ).run()
            finally:
                session.close()  # its MCP servers stop with it
                if trace is not None:
                    trace.close()
            final = ws.checkpoint(f"{job.run_id}/final") if result.outcome != "error" else None
            return SubloopResult(
                task_id=job.task_id,
                attempt=job.attempt,
                template=template.name,
                outcome=result.outcome,
                reason=result.reason,
                iterations=result.iterations,
                code=result.code,
                prompt_tokens=result.usage.prompt_tokens,
                completion_tokens=result.usage.completion_tokens,
                cost_usd=result.usage.cost_usd,
                changed=tuple(result.diff_stat),
                commit=final,
                run_id=job.run_id,
                run_dir=str(run_dir),
                duration_s=result.duration_s,
                agent=dict(result.agent),
            )
    except Stopped as exc:
        # The journal stays at the last completed step; `looprun resume` continues there.
        if run_dir.is_dir():
            with RunJournal(run_dir, job.run_id) as journal:
                journal.event("interrupted", reason=str(exc))
        prefixed("→ interrupted (resume continues from the last completed step)")
        return SubloopResult(
            job.task_id, job.attempt, Path(job.template).stem, "interrupted", str(exc)
        )
    except LooprunError as exc:
        prefixed(f"→ error: {exc}")
        return SubloopResult(
            job.task_id, job.attempt, Path(job.template).stem, "error", str(exc), code="error"
        )


def _held_template(job: SubloopJob) -> Template:
    """The sub-template, loaded again (a worker has only its path), refused when a file
    it is composed from is not as the run recorded it: a command of an earlier sub-loop
    may have rewritten a fragment the outer loop composed before any command ran."""
    choice = None if job.stack is None else StackChoice(job.stack, "the run's stack", given=True)
    with recording() as built, slots.chosen(choice):
        template = load_template(job.template)
    if job.template_files is not None:
        files = recorded.built_from(built, Path(job.template_root or job.workdir))
        recorded.held_to(job.template_files, files, f"the sub-loop {job.run_id}")
    return template


def _typed_inputs(template: Any, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Inputs typed against the sub-template again: a job that crossed the wire as JSON
    lost the marks (``command`` inputs are shell code, not data to quote)."""
    rest = {k: v for k, v in inputs.items() if k != "intent"}
    return build_inputs(template.inputs, inputs.get("intent"), rest)


class _AfterSave:
    """The journal, with a hook after each saved state (everything else passes through)."""

    def __init__(self, inner: Any, hook: Callable[[], None]):
        self._inner, self._hook = inner, hook

    def save_state(self, state: Mapping[str, Any]) -> None:
        self._inner.save_state(state)
        self._hook()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _resolve(job: SubloopJob, events: Any = None) -> Model:
    if job.model.startswith("script:"):
        return ScriptedModel.from_file(job.model.removeprefix("script:"), job.script_key)
    config = events.config if events is not None else None
    return resolve_model(job.model, base_url=job.base_url, config=config, on_event=events)


def _limits(own: Any, share: Mapping[str, Any]) -> Any:
    """The sub-template's own limits, each capped by the outer loop's share."""
    changes: dict[str, Any] = {}
    for name in ("max_tokens", "max_cost_usd", "timeout_s"):
        cap = share.get(name)
        if cap is None:
            continue
        mine = getattr(own, name)
        if mine is None or cap < mine:
            changes[name] = cap
    return replace(own, **changes)
