"""The executor boundary: where sub-loops run.

An outer loop hands each sub-loop to an ``Executor`` as a ``SubloopJob`` — plain,
picklable data (template reference, inputs, working directory or repository + commit,
budget share, run id) — and gets back a ``SubloopResult``. ``LocalExecutor`` runs jobs on
threads of this process (the work is I/O bound: model calls and subprocesses). A
distributed backend only has to run ``subrun.run_subloop`` on a worker that has the repository
at ``job.commit`` (see docs/subloops.md).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import field
from typing import Any, Protocol

from looprun.data.value import valueclass
from looprun.system.proc import kill_groups


@valueclass
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
    trace: Mapping[str, Any] = field(default_factory=dict)  # TraceConfig; empty: untraced
    # the files the run's template was composed from (``run.json``'s ``template_files``,
    # names relative to ``template_root``); ``None``: a run recorded by an older looprun
    template_files: Mapping[str, str] | None = None
    template_root: str = ""
    # the run's stack (``template.slots``): the sub-template composes that stack's pack
    stack: str | None = None


@valueclass
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


class ExecutorLost(KeyboardInterrupt):
    """Where the sub-loops ran is gone (a Ray cluster whose head died): the outer run
    stops as a Ctrl-C stops it, saved at its last completed step, and ``looprun resume``
    continues it there or elsewhere. A KeyboardInterrupt so every layer that records an
    interrupted run records this one; ``reason`` names the loss."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class LocalExecutor:
    """Sub-loops on threads of this process, at most ``parallel`` at a time."""

    def __init__(
        self,
        parallel: int,
        report: Report,
        runner: Callable[[SubloopJob, threading.Event, Report], SubloopResult],
    ):
        self._pool = ThreadPoolExecutor(max_workers=max(1, parallel), thread_name_prefix="subloop")
        self._stop = threading.Event()
        self._report = report
        self._runner = runner
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
        self._stop.set()
        with self._lock:
            threads = set(self._threads)
        kill_groups(threads)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
