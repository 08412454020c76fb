"""Where one run's wall time goes, by phase, for ``--json``'s ``timing``.

Measured at the ports, in the composition root: each port the engine talks to is wrapped
so the time spent inside its calls counts for its phase (the model and the tools: turns;
the observers: baseline until the first turn, checks after; the policy; the journal:
records; git and the snapshots: workspace). What the engine does between those calls is
``loop``. The phases partition the run's timeline from the process's start to the summary,
so they add up to ``total_s``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from looprun.system.proctime import process_age

# in timeline order, so the summary reads like the run
PHASES = (
    "startup",  # the interpreter, the imports, the command line
    "setup",  # template, models, run directory, sealed invocation, workspace, sandbox
    "baseline",
    "plan",
    "turns",
    "checks",
    "policy",
    "records",
    "workspace",
    "loop",  # the interpreter's own work between port calls
    "finish",  # after the engine: commit, report, summary
)

JOURNAL_CALLS = frozenset(
    {"event", "save_state", "save_observation", "fresh_artifacts", "exchange", "save_summary"}
)
WORKSPACE_CALLS = frozenset(
    {
        "base",
        "checkpoint",
        "restore",
        "diff",
        "diff_parts",
        "changed_files",
        "snapshot",
        "exclude",
        "file_changes",
        "describe_base",
        "repository_changed",
    }
)
GUARD_CALLS = frozenset({"review_diff", "check_protected", "needs_approval"})


class RunTimer:
    """Phase times of one run, on ``time.perf_counter``. Only the thread that made it is
    timed: a sub-loop's thread works through its own ports."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        now = clock()
        age = process_age()
        self._origin = now - age if age is not None else now
        self._entered = now
        self._thread = threading.get_ident()
        self._spent = dict.fromkeys(PHASES, 0.0)
        self._stack: list[tuple[str, float]] = []
        self._turned = False
        self._engine_from: float | None = None
        self._engine_to: float | None = None

    # -- the timeline -------------------------------------------------------------------

    def engine_started(self) -> None:
        self._engine_from = self._clock()

    def engine_ended(self) -> None:
        self._engine_to = self._clock()

    def summary(self) -> dict[str, Any]:
        """``{"total_s": ..., "phases": {...}}``, seconds rounded to the millisecond."""
        end = self._clock()
        start_engine = self._engine_from if self._engine_from is not None else end
        end_engine = self._engine_to if self._engine_to is not None else start_engine
        spent = dict(self._spent)
        spent["startup"] = self._entered - self._origin
        spent["setup"] = start_engine - self._entered
        inner = sum(v for k, v in spent.items() if k not in ("startup", "setup"))
        spent["loop"] = max(0.0, (end_engine - start_engine) - inner)
        spent["finish"] = end - end_engine
        return {
            "total_s": round(end - self._origin, 3),
            "phases": {k: round(max(0.0, spent[k]), 3) for k in PHASES},
        }

    # -- the ports ----------------------------------------------------------------------

    def timed(self, phase: str | Callable[[], str], call: Callable[..., Any]) -> Callable[..., Any]:
        """``call``, its time (less any timed call inside it) counted for ``phase``."""

        def run(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() != self._thread:
                return call(*args, **kwargs)
            name = phase() if callable(phase) else phase
            self._enter(name)
            try:
                return call(*args, **kwargs)
            finally:
                self._leave()

        return run

    def _enter(self, phase: str) -> None:
        now = self._clock()
        if self._stack:  # the outer call pauses while this one runs
            outer, since = self._stack[-1]
            self._spent[outer] += now - since
        self._stack.append((phase, now))

    def _leave(self) -> None:
        now = self._clock()
        phase, since = self._stack.pop()
        self._spent[phase] += now - since
        if self._stack:
            outer, _ = self._stack[-1]
            self._stack[-1] = (outer, now)

    def _observing(self) -> str:
        return "checks" if self._turned else "baseline"

    def _turn(self) -> str:
        self._turned = True
        return "turns"

    def model(self, inner: Any, role: str) -> Any:
        if inner is None:
            return None
        phase: str | Callable[[], str] = self._turn if role == "act" else "plan"
        return _Timed(inner, {"complete": self.timed(phase, inner.complete)})

    def toolbox(self, factory: Callable[..., Any]) -> Callable[..., Any]:
        def make(*args: Any, **kwargs: Any) -> Any:
            box = factory(*args, **kwargs)
            return _Timed(box, {"call": self.timed(self._turn, box.call)})

        return make

    def observer(self, inner: Any) -> Any:
        # a listing of the tests is a check's command too (the baseline's, so far)
        calls = {n: self.timed(self._observing, getattr(inner, n)) for n in ("observe", "list_ids")}
        return _Timed(inner, calls)

    def wrap(self, inner: Any, phase: str, names: Iterable[str]) -> Any:
        """``inner`` with the calls ``names`` counted for ``phase``."""
        calls = {n: self.timed(phase, getattr(inner, n)) for n in names if hasattr(inner, n)}
        return _Timed(inner, calls)


class _Timed:
    """A port with some of its calls timed; everything else is the port's own."""

    def __init__(self, inner: Any, calls: dict[str, Callable[..., Any]]) -> None:
        self._inner = inner
        self.__dict__.update(calls)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
