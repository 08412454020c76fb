"""The executor boundary: where sub-loops run.

An outer loop hands each sub-loop to an ``Executor`` as a ``SubloopJob`` — plain,
picklable data (template reference, inputs, working directory or repository + commit,
budget share, run id) — and gets back a ``SubloopResult``. ``LocalExecutor`` runs jobs on
threads of this process (the work is I/O bound: model calls and subprocesses). A
distributed backend only has to run ``run_subloop`` on a worker that has the repository
at ``job.commit`` (see docs/subloops.md).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from looprun.errors import LooprunError
from looprun.models.base import Message, Model, Reply, ToolSpec


@dataclass(frozen=True)
class SubloopJob:
    """Everything a worker needs to run one sub-loop; plain data only."""

    task_id: str
    attempt: int
    template: str  # absolute path or built-in name
    inputs: Mapping[str, Any]
    workdir: str  # where the sub-loop works (a worktree, or the outer tree)
    repository: str  # the outer repository, for workers that clone
    commit: str  # the outer loop's state the sub-loop starts from
    run_id: str
    run_dir: str  # the sub-loop's own run dir, under the outer run dir
    model: str  # the act model reference (script:FILE, openai:..., anthropic:...)
    script_key: tuple[tuple[str, int], ...] = ()  # a scripted model's part for this loop
    base_url: str | None = None
    limits: Mapping[str, Any] = field(default_factory=dict)  # the budget share
    resume: bool = False  # continue a sub-loop interrupted earlier
    depth: int = 1
    plan_model: str = ""  # the plan model reference; empty: the act model
    cli_models: Mapping[str, str | None] = field(default_factory=dict)  # passed down
    sandbox: str | None = None  # the command line's --sandbox, passed down
    held_out: tuple[str, ...] = ()  # the outer loops' held-out tests, hidden here too


@dataclass(frozen=True)
class SubloopResult:
    """How one sub-loop ended, with its usage and final checkpoint, for the outer loop."""

    task_id: str
    attempt: int
    template: str
    outcome: str
    reason: str
    iterations: int = 0
    code: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    changed: tuple[str, ...] = ()  # files changed relative to job.commit
    commit: str | None = None  # a commit of the sub-loop's final tree
    run_id: str = ""
    run_dir: str = ""
    duration_s: float = 0.0
    agent: Mapping[str, Any] = field(default_factory=dict)  # act.agent: its CLI's totals

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


Report = Callable[[str], None]


class Executor(Protocol):
    """Runs sub-loop jobs somewhere and reports their results."""

    def submit(self, job: SubloopJob) -> Future[SubloopResult]: ...
    def stop(self) -> None:
        """Ask every running job to stop at its next model call (journals stay consistent)."""

    def shutdown(self) -> None: ...


class Stopped(Exception):
    """The outer loop was interrupted; the sub-loop ends here and can be resumed.

    Deliberately not a LooprunError: the engine must not turn it into an ``error``
    outcome and save that over the last completed step. Like a Ctrl-C, it unwinds the
    loop and leaves its state and journal as they were after the last completed step.
    """


class StoppableModel:
    """Wraps a model so a running sub-loop stops at its next call once asked to."""

    def __init__(self, inner: Model, stop: threading.Event):
        self.inner, self._stop = inner, stop
        self.ref = inner.ref
        self.stop_event = stop  # a nested outer loop passes the stop on to its sub-loops

    def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        role: str = "act",
        timeout_s: float | None = None,
        max_output_tokens: int | None = None,
    ) -> Reply:
        if self._stop.is_set():
            raise Stopped("stopped: the outer loop was interrupted")
        return self.inner.complete(
            messages, tools, role=role, timeout_s=timeout_s, max_output_tokens=max_output_tokens
        )

    @property
    def position(self) -> Any:
        return getattr(self.inner, "position", None)

    @property
    def script_key(self) -> tuple[tuple[str, int], ...]:
        """A scripted model's place in the tree, so a nested outer loop's sub-loops
        find their own scripts."""
        return tuple(getattr(self.inner, "script_key", ()))

    def seek(self, position: int) -> None:
        seek = getattr(self.inner, "seek", None)
        if seek is not None:
            seek(position)


class StoppableObserver:
    """Wraps the observer port: once stopped, no check starts, and a check that was
    running (killed by ``LocalExecutor.stop``) is not taken as a finding."""

    def __init__(self, inner: Any, stop: threading.Event):
        self.inner, self._stop = inner, stop

    def observe(self, spec: Any, context: Any, *, deadline: float | None, base: str) -> Any:
        if self._stop.is_set():
            raise Stopped("stopped: the outer loop was interrupted")
        obs = self.inner.observe(spec, context, deadline=deadline, base=base)
        if self._stop.is_set():
            raise Stopped("stopped: the outer loop was interrupted")
        return obs


class StoppableActor:
    """Wraps the actor port (act.agent) like the observer: once stopped, no CLI turn
    starts, and a turn the stop killed (``LocalExecutor.stop`` kills its process group)
    is not taken as what the CLI did."""

    def __init__(self, inner: Any, stop: threading.Event):
        self.inner, self._stop = inner, stop

    def act(self, request: Any) -> Any:
        if self._stop.is_set():
            raise Stopped("stopped: the outer loop was interrupted")
        report = self.inner.act(request)
        if self._stop.is_set():
            raise Stopped("stopped: the outer loop was interrupted")
        return report


class LocalExecutor:
    """Sub-loops on threads of this process, at most ``parallel`` at a time."""

    def __init__(
        self,
        parallel: int,
        report: Report,
        runner: Callable[[SubloopJob, threading.Event, Report], SubloopResult] | None = None,
    ):
        self._pool = ThreadPoolExecutor(max_workers=max(1, parallel), thread_name_prefix="subloop")
        self._stop = threading.Event()
        self._report = report
        self._runner = runner or run_subloop
        self._threads: set[int] = set()
        self._lock = threading.Lock()

    def submit(self, job: SubloopJob) -> Future[SubloopResult]:
        return self._pool.submit(self._run, job)

    def _run(self, job: SubloopJob) -> SubloopResult:
        me = threading.get_ident()
        with self._lock:
            self._threads.add(me)
        try:
            return self._runner(job, self._stop, self._report)
        finally:
            with self._lock:
                self._threads.discard(me)

    def stop(self) -> None:
        """Stop every job at its next model call, and kill the checks and commands they
        run now (each runs in its own session, so a Ctrl-C does not reach it)."""
        from looprun.system.proc import kill_groups

        self._stop.set()
        with self._lock:
            threads = set(self._threads)
        kill_groups(threads)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


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
    from looprun.journal.writer import RunJournal
    from looprun.loop.engine import Engine, RunInfo
    from looprun.loop.state import LoopState
    from looprun.run.models import NO_MODEL, ModelEvents, agent_role, needs_http_model
    from looprun.run.ports import build_ports
    from looprun.template.loader import load_template

    def prefixed(line: str) -> None:
        report(f"[{job.task_id}] {line}")

    run_dir = Path(job.run_dir)

    try:
        template = load_template(job.template)
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
            }
            journal.save_invocation(invocation)
            state = None
            raw = journal.load_state() if job.resume else None
            if raw is not None:
                state = LoopState.from_dict(raw)
                state.stop = None
            ports, ws = build_ports(
                template,
                Path(job.workdir),
                journal,
                act=model,  # type: ignore[arg-type]
                plan=plan_model,  # type: ignore[arg-type]
                report=prefixed,
                interactive=False,
                base=job.commit,
                sandbox_mode=job.sandbox,
                inputs=_typed_inputs(template, job.inputs),
                held_out=job.held_out,
            )
            ports = replace(ports, observer=StoppableObserver(ports.observer, stop))
            if ports.actor is not None:
                ports = replace(ports, actor=StoppableActor(ports.actor, stop))
            if job.resume:  # the outer loop holds the run lock: these locks' owner is dead
                for lock in ws.clear_stale_locks(job.run_id):
                    prefixed(f"note: removed {lock}, left behind by a run that was killed")
            if job.resume and state is None:
                ws.restore(job.commit)  # redo from the start, never on top of half an edit
            run = RunInfo(job.run_id, str(run_dir), str(journal.artifacts), str(ws.workdir))
            result = Engine(
                template,
                ports,
                inputs=_typed_inputs(template, job.inputs),
                run=run,
                limits=_limits(template.limits, job.limits),
                state=state,
                invocation=invocation,
            ).run()
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


def _typed_inputs(template: Any, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Inputs typed against the sub-template again: a job that crossed the wire as JSON
    lost the marks (``command`` inputs are shell code, not data to quote)."""
    from looprun.loop.inputs import build_inputs

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
        from looprun.models.scripted import ScriptedModel

        return ScriptedModel.from_file(job.model.removeprefix("script:"), job.script_key)
    from looprun.models.registry import resolve_model

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
