"""Sub-loops on a Ray cluster, behind the ``Executor`` protocol.

Each sub-loop attempt is one call to a warm worker (``warm``: a long-lived actor that
imports looprun once and keeps a clone per remote), never retried by Ray: looprun, not
Ray, decides what happens to a lost worker. The job is small JSON
(``RemoteJob``); repository content, checkpoints and journals travel through git (see
``gitsync``). A lost worker (killed, its node gone) or a stuck one (the watchdog saw no
pushed step for ``watchdog_s``) is fenced out by a new execution token and its sub-loop
resumed from the last step it pushed, never re-run from scratch. The watchdog (by
default the longest step the sub-template allows, see ``watchdog``) relaunches at once,
without waiting for Ray to confirm the old task's end: a frozen node may never answer,
and the fence already keeps the old execution from publishing anything. Only the current
token's result is accepted; what a discarded execution spent still counts.

A cluster whose head (GCS) stops answering for ``head_timeout_s`` (it refuses the
connection, or, frozen or cut off, lets a probe's deadline pass) is lost: every open
sub-loop's future raises ``ExecutorLost``, and the outer run stops as a Ctrl-C stops it,
saved and resumable, before Ray's own reconnect timeout would end the process.

Stopping is cooperative first (each worker stops at its next model call and kills its
running checks), then, after ``grace_s``, the worker is killed (and replaced by the next launch).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import threading
import time
import uuid
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from looprun.data.value import valueclass
from looprun.errors import LooprunError, UsageError
from looprun.journal.handoff import local_seq, pushed_commit, pushed_seq
from looprun.remote.ahead import Ahead
from looprun.remote.gitsync import (
    Remote,
    checkpoint_refs,
    commit_directory,
    extract_commit,
    git_dir,
    outer_git,
    sync_ref,
)
from looprun.remote.job import RemoteJob
from looprun.remote.ray_cluster import (
    JOIN_S,
    NEEDS_RAY,
    SilentHead,
    connect,
    head_address,
    new_board,
    silent_head,
)
from looprun.remote.warm import WarmPool
from looprun.remote.watchdog import default_watchdog
from looprun.remote.worker import result_from_dict
from looprun.run.executor import ExecutorLost, Report, SubloopJob, SubloopResult
from looprun.system.abandon import abandon_at_exit
from looprun.workspace.tree import Workspace

_TICK_S = 0.2
_LEASE_POLL_S = 5.0
_HEALTH_S = 1.0  # how often the monitor checks that the head answers
_BOARD_CHECK_S = 2.0  # how often the monitor checks that the board lives
_LAUNCH_TRIES = 3  # launches of one sub-loop in a row that may fail before it errs
_LAUNCH_RETRY_S = 2.0  # the wait before launching again


@valueclass
class RaySettings:
    """Where and how: ``address`` of an existing cluster (None: a local one on
    127.0.0.1), ``remote`` git URL workers reach (None: the outer repository itself, for
    workers that share this file system), and the failure policy: ``watchdog_s`` None
    means each sub-loop's own step bound; ``head_timeout_s`` is how long the head may
    stay silent before the cluster counts as lost, ``join_timeout_s`` how long joining
    it may take."""

    address: str | None = None
    remote: str | None = None
    grace_s: float = 5.0
    watchdog_s: float | None = None
    max_losses: int = 3
    num_cpus: int | None = None
    head_timeout_s: float = 5.0
    join_timeout_s: float = JOIN_S

    @classmethod
    def parse(cls, spec: str, *, remote: str | None = None) -> RaySettings:
        """``ray`` or ``ray:ADDRESS`` (``--executor``, ``LOOPRUN_EXECUTOR``)."""
        name, _, address = spec.partition(":")
        if name != "ray":
            raise UsageError(f"--executor {spec}: expected local, ray or ray:ADDRESS")
        spec = importlib.util.find_spec("ray")
        if spec is None or spec.origin is None:  # absent, or a bare directory named ray
            raise UsageError(NEEDS_RAY)
        values = {
            "watchdog_s": _seconds("LOOPRUN_RAY_WATCHDOG_S"),
            "grace_s": _seconds("LOOPRUN_RAY_GRACE_S"),
            "head_timeout_s": _seconds("LOOPRUN_RAY_HEAD_TIMEOUT_S"),
            "join_timeout_s": _seconds("LOOPRUN_RAY_JOIN_TIMEOUT_S"),
        }
        given = {k: v for k, v in values.items() if v is not None}
        return cls(address=address or None, remote=remote, **given)

    def factory(self) -> RayExecutors:
        """An ``ExecutorFactory``: (parallel, report) -> executor."""
        return RayExecutors(self)


class RayExecutors:
    """One run's executors on the cluster. ``warm_up`` (a run whose template has
    sub-loops) joins an existing cluster ahead of its first sub-loop (see ``ahead``);
    the first executor takes over that join and its board."""

    def __init__(self, settings: RaySettings) -> None:
        self.settings = settings
        self._ahead: Ahead | None = None

    def warm_up(self) -> None:
        """Start joining now. A local cluster is started when first needed, as before:
        starting one is no work to overlap, and it belongs on the main thread."""
        if self._ahead is None and self.settings.address is not None:
            self._ahead = Ahead(self.settings.address, self.settings.join_timeout_s)

    def __call__(self, parallel: int, report: Report) -> RayExecutor:
        ahead, self._ahead = self._ahead, None
        return RayExecutor(parallel, report, self.settings, ahead)


def _seconds(name: str) -> float | None:
    """A positive number of seconds from the environment variable ``name``, if set."""
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise UsageError(f"{name}={text}: expected a positive number of seconds")
    return value


@dataclass
class _Attempt:
    job: SubloopJob
    remote_job: RemoteJob
    remote: Remote
    ref: Any
    future: Future[SubloopResult]
    submitted: float
    watchdog_s: float = 0.0
    losses: int = 0
    last_progress: float = 0.0
    last_poll: float = 0.0
    seen_lease: str = ""
    discarded: dict[str, float] = field(default_factory=dict)
    # executions given up on without Ray confirming their end (a frozen node): their
    # results, if they ever come, count only for what they spent
    abandoned: list[Any] = field(default_factory=list)
    worker: tuple[str, Any] | None = None  # the warm worker running it: (name, handle)
    take: Any = None  # its progress lines asked for and not yet answered
    held: str = ""  # why it is to be relaunched once the head answers again
    failed_launches: int = 0  # launches in a row that failed (git, the lease)
    retry_at: float = 0.0  # not relaunched before this time (after a failed launch)


class RayExecutor:
    """Runs sub-loop jobs as Ray tasks; one monitor thread turns them into futures."""

    def __init__(
        self,
        parallel: int,
        report: Report,
        settings: RaySettings | None = None,
        ahead: Ahead | None = None,
    ):
        """``ahead``: the join (and board) started before, taken over here."""
        self.settings = settings or RaySettings()
        self._report = report
        self._lost = ""  # why the cluster is lost, once it is
        self._head = self.settings.address or "127.0.0.1"
        try:
            if ahead is not None:
                self._ray = ahead.joined()
            else:
                self._ray = connect(
                    self.settings.address, self.settings.num_cpus, self.settings.join_timeout_s
                )
        except SilentHead as exc:  # frozen before this run first reached it
            raise ExecutorLost(self._given_up(str(exc))) from exc
        self._head = head_address(self._ray)
        self._unanswered_since: float | None = None
        self._last_health = 0.0
        problem = self._answers_within(self.settings.head_timeout_s)
        if problem:  # lost while no sub-loop ran (between two outer iterations)
            raise ExecutorLost(self._given_up(problem))
        self._board = new_board(self._ray) if ahead is None else ahead.board()
        self._board_probe: Any = None  # the board's answer asked for, not yet come
        self._last_board_check = 0.0
        self._pool = WarmPool(self._ray)
        self._attempts: dict[str, _Attempt] = {}  # by task id
        self._lock = threading.Lock()
        self._resolving = threading.Lock()
        self._stopping = threading.Event()
        self._closed = threading.Event()
        self._monitor = threading.Thread(target=self._watch, name="looprun-ray", daemon=True)
        self._monitor.start()

    # -- the Executor protocol --------------------------------------------------------------

    def submit(self, job: SubloopJob) -> Future[SubloopResult]:
        if self._lost:
            raise ExecutorLost(self._lost)
        outer = outer_git(job.repository)
        url = self.settings.remote or str(git_dir(outer))
        remote = Remote(outer, url)
        start = sync_ref(job.run_id, "start")
        if not remote.push([f"+{job.commit}:{start}"]):
            raise LooprunError(f"could not push the start of {job.run_id} to {url}")
        if job.resume:
            self._hand_over(remote, job)
        future: Future[SubloopResult] = Future()
        future.set_running_or_notify_cancel()
        attempt = _Attempt(job, RemoteJob.for_subloop(job, url), remote, None, future, 0.0)
        attempt.watchdog_s = self.settings.watchdog_s or default_watchdog(job.template, job.limits)
        self._launch(attempt, resume=job.resume)
        with self._lock:
            self._attempts[job.task_id] = attempt
        return future

    def _hand_over(self, remote: Remote, job: SubloopJob) -> None:
        """A sub-loop resumed here after it ran elsewhere (local threads): when its run
        dir in the outer run dir went further than what a worker last pushed, push it
        with its checkpoints, so the worker continues it instead of starting over."""
        run_dir, ref = Path(job.run_dir), sync_ref(job.run_id, "journal")
        mine = local_seq(run_dir)
        if not mine:
            return
        if not remote.same_repository():
            remote.fetch(f"+{ref}:{ref}")
        pushed = pushed_commit(remote.git, job.run_id)
        if pushed and pushed_seq(remote.git, pushed) >= mine:
            return
        sha = commit_directory(remote.git, run_dir, f"looprun journal of {job.run_id}: handed over")
        own = checkpoint_refs(job.run_id)
        if not remote.push([f"+{sha}:{ref}", f"+{own}:{own}"]):
            raise LooprunError(f"could not hand {job.run_id} over to {remote.url}")

    def stop(self) -> None:
        """Cooperative stop, then, after the grace period, force-cancel what still runs."""
        self._stopping.set()
        if self._lost:  # nothing to ask: the cluster is gone, the futures already ended
            return
        try:  # the board tells workers at once; without it, the force-cancel still stops them
            self._ray.get(self._board.stop.remote(), timeout=self.settings.grace_s)
        except Exception as exc:  # the actor is gone (its node lost) or slow: never fatal
            self._report(f"note: the stop flag could not be set ({type(exc).__name__})")
        deadline = time.monotonic() + self.settings.grace_s
        while time.monotonic() < deadline and self._open():
            time.sleep(_TICK_S)
        for a in self._open():
            self._kill(a)
            self._resolve(a, _interrupted(a.job, "stopped: force-cancelled after the grace period"))

    def shutdown(self) -> None:
        self._closed.set()
        self._monitor.join(timeout=10)
        if self._lost:  # every Ray call would wait on the dead head
            return
        self._drain()
        for a in self._open():  # never leave a job running behind the outer loop
            self._kill(a)
            self._resolve(a, _interrupted(a.job, "stopped: the executor shut down"))
        with contextlib.suppress(Exception):  # the actor may be gone with its node
            self._ray.kill(self._board)
        # The connection stays for the next outer iteration; Ray ends it at exit.

    # -- attempts -------------------------------------------------------------------------

    def _launch(self, a: _Attempt, *, resume: bool) -> None:
        """A new execution token fences out every earlier execution, then the task starts."""
        token = uuid.uuid4().hex
        a.remote.grant(a.job.run_id, token)
        a.remote_job = replace(a.remote_job, token=token, resume=resume)
        self._start(a)
        a.submitted = a.last_progress = time.monotonic()

    def _start(self, a: _Attempt) -> None:
        a.worker, a.take = self._pool.acquire(), None
        a.ref = a.worker[1].execute.remote(a.remote_job.to_json(), self._board)

    def _kill(self, a: _Attempt) -> None:
        """Force-stop: the worker goes, with the job it runs (a new one replaces it)."""
        if a.worker is not None:
            self._pool.kill(*a.worker)
            a.worker, a.take = None, None

    def _open(self) -> list[_Attempt]:
        with self._lock:
            return [a for a in self._attempts.values() if not a.future.done()]

    def _watch(self) -> None:
        while not self._closed.is_set() and not self._lost:
            try:
                self._tick()
            except Exception as exc:  # never die silently: the outer loop waits on us
                if not self._check_head(force=True):
                    self._report(f"note: the Ray monitor failed once ({type(exc).__name__})")
                    time.sleep(_TICK_S)

    def _tick(self) -> None:
        if self._check_head():
            return
        self._check_board()
        self._drain()
        open_ = self._open()
        now = time.monotonic()
        for a in open_:
            # the head answers again, or a failed launch waited its turn
            if a.held and self._unanswered_since is None and now >= a.retry_at:
                self._relaunch(a, a.held)
        running = {a.ref: a for a in open_ if not a.held and not a.future.done()}
        abandoned = {r: a for a in open_ for r in a.abandoned}
        if not running and not abandoned:
            self._closed.wait(_TICK_S)  # a shutdown ends the wait
            return
        refs = [*running, *abandoned]
        # the first to end ends the wait, and every other one ended by then comes with it
        self._ray.wait(refs, num_returns=1, timeout=_TICK_S)
        ready, _ = self._ray.wait(refs, num_returns=len(refs), timeout=0)
        for ref in ready:
            if ref in running:
                self._finished(running[ref])
            else:
                self._abandoned_ended(abandoned[ref], ref)
        self._watchdog([a for r, a in running.items() if r not in ready])

    def _check_board(self) -> None:
        """Replace a board whose actor died (the process hosting it, while this driver
        and the head live) and hand the new one to every running worker: they keep their
        jobs (see ``warm``), and a stop still reaches them. A board that answers late
        (a loaded node) is only asked again later."""
        now = time.monotonic()
        if now - self._last_board_check < _BOARD_CHECK_S:
            return
        self._last_board_check = now
        if self._board_probe is None:
            self._board_probe = self._board.is_stopped.remote()
            return
        ready, _ = self._ray.wait([self._board_probe], timeout=0)
        if not ready:
            return
        probe, self._board_probe = self._board_probe, None
        try:
            self._ray.get(probe, timeout=2)
            return
        except self._ray.exceptions.RayActorError:
            pass
        except Exception:  # slow or unclear: asked again at the next check
            return
        self._board = new_board(self._ray)
        if self._stopping.is_set():
            self._board.stop.remote()
        self._report("note: the run's board was lost; a new one took its place")
        for a in self._open():
            if a.worker is not None:
                a.worker[1].rebind.remote(self._board)

    def _answers_within(self, window_s: float) -> str:
        """Nothing ("") once the head answers a probe; why not, if it stays silent for
        ``window_s`` (a busy head answers late, a stopped one never)."""
        since = time.monotonic()
        while True:
            problem = silent_head(self._ray, self._head)
            if not problem or time.monotonic() - since >= window_s:
                return problem
            time.sleep(_HEALTH_S)

    def _check_head(self, *, force: bool = False) -> bool:
        """True once the head has not answered for ``head_timeout_s`` (refused the
        connection, or let a probe's deadline pass): then every open sub-loop's future
        raises ``ExecutorLost``. A probe waits ``PROBE_S`` at most, so a frozen head
        never holds the monitor longer."""
        now = time.monotonic()
        if not force and now - self._last_health < _HEALTH_S:
            return False
        self._last_health = now
        problem = silent_head(self._ray, self._head)
        if not problem:
            self._unanswered_since = None
            return False
        if self._unanswered_since is None:
            self._unanswered_since = now
        if now - self._unanswered_since < self.settings.head_timeout_s:
            return False
        self._lost = self._given_up(problem)
        self._report(f"looprun: {self._lost}: stopping the run")
        for a in self._open():
            if not a.future.done():
                a.future.set_exception(ExecutorLost(self._lost))
        return True

    def _given_up(self, problem: str) -> str:
        """Why the cluster is lost. Ray's exit handler would wait on the lost head, so
        this process ends without it once the run is recorded."""
        reason = f"the Ray cluster was lost (its head {self._head} does not answer: {problem})"
        abandon_at_exit(reason)
        return reason

    def _drain(self, only: _Attempt | None = None) -> None:
        """Report the progress lines the workers hold (each warm worker keeps its job's
        lines: it is up already, where a board would first have to start). A worker that
        does not answer at once (a frozen node) keeps its question for the next tick
        rather than holding up the monitor."""
        attempts = [only] if only is not None else self._open()
        asked: dict[Any, _Attempt] = {}
        for a in attempts:
            if a.worker is None:
                continue
            if a.take is None:
                a.take = a.worker[1].take.remote()
            asked[a.take] = a
        if not asked:
            return
        timeout = 10.0 if only is not None else _TICK_S
        try:
            ready, _ = self._ray.wait(list(asked), num_returns=len(asked), timeout=timeout)
        except Exception:  # progress lines are best effort; results are not
            return
        for ref in ready:
            asked[ref].take = None
            try:
                lines = self._ray.get(ref, timeout=2)
            except Exception:
                continue
            for line in lines:
                self._report(line)

    def _finished(self, a: _Attempt) -> None:
        ray = self._ray
        try:
            data = ray.get(a.ref)
            self._drain(a)  # its last lines before its result
        except ray.exceptions.RayTaskError as exc:  # the worker's own code failed
            self._release(a)
            self._resolve(a, _error(a.job, f"worker error: {_last_line(exc)}"))
            return
        except ray.exceptions.RayError as exc:  # the worker or its node was lost, or killed
            self._kill(a)
            if self._stopping.is_set():
                self._resolve(a, _interrupted(a.job, "stopped while its worker was lost"))
            else:
                a.losses += 1
                if a.losses > self.settings.max_losses:
                    self._resolve(a, _error(a.job, f"worker lost {a.losses} times: {exc}"))
                else:
                    self._relaunch(a, f"worker lost ({type(exc).__name__})")
            return
        self._release(a)
        if data.get("busy"):  # another run's job took that worker first: send it on
            self._start(a)
            return
        self._accept(a, data)

    def _abandoned_ended(self, a: _Attempt, ref: Any) -> None:
        """An execution the watchdog gave up on came back: count what it spent."""
        a.abandoned.remove(ref)
        try:
            data = self._ray.get(ref, timeout=10)
        except Exception as exc:  # cancelled, or lost with its node: it pushed nothing more
            self._report(f"[{a.job.task_id}] a replaced execution ended: {type(exc).__name__}")
            return
        for k in ("prompt_tokens", "completion_tokens", "cost_usd"):
            a.discarded[k] = a.discarded.get(k, 0.0) + float(data.get(k) or 0)
        self._report(
            f"[{a.job.task_id}] a replaced execution ended: {data.get('outcome', '?')} "
            f"({data.get('reason', '')})"
        )

    def _release(self, a: _Attempt) -> None:
        if a.worker is not None:
            self._pool.release(a.worker[0])
            a.worker, a.take = None, None

    def _relaunch(self, a: _Attempt, why: str) -> None:
        """A new execution, once the head answers: a worker lost with the head (killed
        or frozen) would have its replacement wait on the head, and the monitor with it,
        until Ray ends the process. Until then the attempt waits (see ``_tick``)."""
        if self._stopping.is_set():  # a stop asked for meanwhile: resumed by the next run
            self._resolve(a, _interrupted(a.job, f"stopped after {why}"))
            return
        problem = silent_head(self._ray, self._head)
        if problem:
            if not a.held:
                self._report(f"[{a.job.task_id}] {why}: waiting for the head ({problem})")
            a.held = why
            return
        if not a.failed_launches:
            self._report(f"[{a.job.task_id}] {why}: resuming from its last pushed step")
        a.held = ""
        try:
            self._launch(a, resume=True)
        except LooprunError as exc:
            # a Ctrl-C reaches the git this runs too (it shares the terminal's process
            # group) before the stop reaches the executor: try again at the next tick,
            # where a stop finds the sub-loop interrupted, resumable, not failed
            a.failed_launches += 1
            if a.failed_launches >= _LAUNCH_TRIES:
                self._resolve(a, _error(a.job, f"could not resume after {why}: {exc}"))
            else:
                a.held = why
                a.retry_at = time.monotonic() + _LAUNCH_RETRY_S
            return
        a.failed_launches = 0

    def _accept(self, a: _Attempt, data: dict[str, Any]) -> None:
        """Only the current token's result counts, and only if its final push holds."""
        if data.get("token") != a.remote_job.token or data.get("outcome") == "superseded":
            for k in ("prompt_tokens", "completion_tokens", "cost_usd"):
                a.discarded[k] = a.discarded.get(k, 0.0) + float(data.get(k) or 0)
            if not a.future.done() and data.get("token") == a.remote_job.token:
                self._relaunch(a, "its execution was superseded")
            return
        job = a.job
        if data.get("outcome") == "interrupted":  # _resolve brings its last pushed step
            self._resolve(a, _interrupted(job, data.get("reason", "")))
            return
        lease = a.remote.lease(job.run_id)
        if data.get("lease") and (lease is None or lease.sha != data["lease"]):
            self._relaunch(a, "its final push was overtaken")
            return
        self._sync_back(a)
        result = result_from_dict(data, job.run_dir)
        if result.commit and job.workdir != job.repository and Path(job.workdir).is_dir():
            # the local worktree shows the sub-loop's final tree, as with local workers
            Workspace.open(Path(job.workdir), state_dir=Path(job.workdir) / ".looprun").restore(
                result.commit
            )
        self._resolve(a, result)

    def _sync_back(self, a: _Attempt) -> None:
        """Fetch the sub-loop's checkpoints and journal, and lay its run dir out locally."""
        job, remote = a.job, a.remote
        own = checkpoint_refs(job.run_id)
        journal = sync_ref(job.run_id, "journal")
        if not remote.same_repository():
            remote.fetch(f"+{own}:{own}", f"+{journal}:{journal}")
        sha = remote.git.run("rev-parse", "-q", "--verify", journal, check=False).strip()
        if sha:
            extract_commit(remote.git, sha, Path(job.run_dir))

    def _resolve(self, a: _Attempt, result: SubloopResult) -> None:
        with self._resolving:  # the monitor and a stop may both end one attempt
            self._resolve_once(a, result)

    def _resolve_once(self, a: _Attempt, result: SubloopResult) -> None:
        if a.future.done():
            return
        if result.outcome in ("interrupted", "error"):
            # whatever stopped it (a stop, a cancel, a lost worker), the steps it pushed
            # are the sub-loop's record here too: a resume on any executor continues them
            try:
                self._sync_back(a)
            except LooprunError as exc:
                self._report(f"[{a.job.task_id}] could not fetch its pushed steps: {exc}")
        if a.discarded:  # spent by executions whose results were thrown away
            result = replace(
                result,
                prompt_tokens=result.prompt_tokens + int(a.discarded.get("prompt_tokens", 0)),
                completion_tokens=result.completion_tokens
                + int(a.discarded.get("completion_tokens", 0)),
                cost_usd=result.cost_usd + a.discarded.get("cost_usd", 0.0),
            )
        a.future.set_result(result)

    def _watchdog(self, waiting: list[_Attempt]) -> None:
        """A sub-loop silent for longer than its watchdog goes to a new execution at
        once: the old worker is killed without waiting (a frozen node never answers),
        and the new token fences it out of every later push."""
        if self._stopping.is_set():
            return
        now = time.monotonic()
        for a in waiting:
            limit = a.watchdog_s
            if now - a.last_poll >= min(_LEASE_POLL_S, limit / 2):
                a.last_poll = now
                lease = a.remote.lease(a.job.run_id)
                if lease is not None and lease.sha != a.seen_lease:
                    a.seen_lease, a.last_progress = lease.sha, now
            if now - a.last_progress <= limit:
                continue
            self._report(f"[{a.job.task_id}] no pushed step for {limit:g} s: cancelling it")
            self._kill(a)
            a.abandoned.append(a.ref)
            a.losses += 1
            if a.losses > self.settings.max_losses:
                self._resolve(a, _error(a.job, f"no progress after {a.losses} executions"))
            else:
                self._relaunch(a, "no progress within the watchdog period")


def _interrupted(job: SubloopJob, reason: str) -> SubloopResult:
    return SubloopResult(job.task_id, job.attempt, Path(job.template).stem, "interrupted", reason)


def _error(job: SubloopJob, reason: str) -> SubloopResult:
    return SubloopResult(
        job.task_id, job.attempt, Path(job.template).stem, "error", reason, code="error"
    )


def _last_line(exc: BaseException) -> str:
    """A worker's error as one line: Ray's text is the remote traceback, whose last line
    names the exception."""
    text = str(exc).strip().splitlines()
    return text[-1] if text else type(exc).__name__


def ray_executors(spec: str, sync_remote: str | None) -> Any:
    """The ``RemoteExecutors`` the CLI hands to a run: ``spec`` is ``ray`` or
    ``ray:ADDRESS``; ``sync_remote`` the ``--sync-remote`` repository, if any."""
    return RaySettings.parse(spec, remote=sync_remote).factory()
