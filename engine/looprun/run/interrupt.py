"""A run stopped by SIGINT or SIGTERM: signals turned into an interrupt, and the
interrupted run recorded so that ``looprun resume`` can continue it."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

from looprun.errors import LooprunError
from looprun.journal.writer import RunJournal
from looprun.loop.engine import Engine
from looprun.loop.finish import DIFF_CAP
from looprun.loop.outcome import RunResult, TaskResult, UsageTotals
from looprun.run.executor import ExecutorLost


class Terminated(KeyboardInterrupt):
    """SIGTERM (a CI job cancelled): handled like Ctrl-C, so the run is recorded."""


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    def raise_terminated(signum: int, frame: Any) -> None:
        raise Terminated()

    try:
        previous = signal.signal(signal.SIGTERM, raise_terminated)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def signals_ignored() -> Iterator[None]:
    try:
        saved = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:
        yield
        return
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block ends, then deliver them: a Ctrl-C while a
    finished sub-loop is merged, recorded and cleaned up takes effect after that step,
    so it never leaves a merge without its record."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    saved = {s: signal.signal(s, lambda n, _f: held.append(n)) for s in _DEFERRED}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        if held:
            os.kill(os.getpid(), held[0])


_DEFERRED = (signal.SIGINT, signal.SIGTERM)


def record_interrupted(
    engine: Engine, ws: Any, journal: RunJournal, exc: BaseException, elapsed: float
) -> RunResult:
    """Record a run stopped by a signal or a lost executor. ``state.json`` stays at the
    last completed step (nothing half-done is saved), so ``looprun resume`` redoes the
    interrupted iteration."""
    st = engine.state
    name = _stop_name(exc)
    cause = exc.reason if isinstance(exc, ExecutorLost) else name
    reason = (
        f"{cause} during iteration {st.iterations + 1}; resume redoes it "
        "from the last completed step"
    )
    tasks = [TaskResult(**r) for r in st.task_results]
    for i, task in enumerate((st.tasks or [])[st.task_index :]):
        current = i == 0
        tasks.append(
            TaskResult(
                task.id,
                "interrupted" if current else "pending",
                st.task_iteration if current else 0,
            )
        )
    try:
        changed = tuple(ws.changed_files())
        diff = ws.diff()
    except LooprunError:
        changed, diff = (), ""
    result = RunResult(
        outcome="interrupted",
        reason=reason,
        code="interrupted",
        iterations=st.iterations,
        tasks=tuple(tasks),
        run_id=journal.run_id,
        run_dir=str(journal.dir),
        usage=UsageTotals(st.prompt_tokens, st.completion_tokens, st.cost_usd),
        duration_s=elapsed,
        last_failure=st.last_failure,
        diff_stat=changed,
        pending_approvals=tuple((st.pending or {}).get("paths", ())),
        diff=diff[:DIFF_CAP],
    )
    journal.event("interrupted", reason=reason, signal=name, iteration=st.iterations)
    journal.save_summary(result.summary())
    return result


def _stop_name(exc: BaseException) -> str:
    if isinstance(exc, Terminated):
        return "SIGTERM"
    if isinstance(exc, ExecutorLost):
        return "executor lost"
    return "SIGINT"
