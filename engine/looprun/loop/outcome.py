"""How a run ends: the outcome names, their exit codes, and the frozen result records."""

from __future__ import annotations

from dataclasses import field
from typing import Any, Literal

from looprun.data.value import valueclass
from looprun.errors import (
    EXIT_ABORTED,
    EXIT_DONE,
    EXIT_ERROR,
    EXIT_ESCALATED,
    EXIT_EXHAUSTED,
    EXIT_STALLED,
)

Outcome = Literal["done", "exhausted", "stalled", "escalated", "aborted", "error", "interrupted"]

# A run stopped by SIGINT/SIGTERM is not over: its state stays at the last completed step.
EXIT_INTERRUPTED = 130

EXIT_CODES: dict[str, int] = {
    "done": EXIT_DONE,
    "exhausted": EXIT_EXHAUSTED,
    "stalled": EXIT_STALLED,
    "escalated": EXIT_ESCALATED,
    "aborted": EXIT_ABORTED,
    "error": EXIT_ERROR,
    "interrupted": EXIT_INTERRUPTED,
}


@valueclass
class Stop:
    """Why a run stops: an outcome, a short machine name (``max_iterations``) and words."""

    outcome: Outcome
    reason: str
    code: str = ""  # e.g. max_iterations, max_tokens, timeout, per_tool.run, max_repeats

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "reason": self.reason, "code": self.code}


@valueclass
class TaskResult:
    """How one planned task ended (or that it never started)."""

    id: str
    outcome: str  # done | an unfinished run's outcome | pending
    iterations: int
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "outcome": self.outcome,
            "iterations": self.iterations,
            "reason": self.reason,
        }


@valueclass
class UsageTotals:
    """Tokens and cost a run spent, reported in its summary."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    def describe(self) -> str:
        """``2,607 tokens, $0.0123`` for the verdict line."""
        tokens = self.prompt_tokens + self.completion_tokens
        return f"{tokens:,} tokens, ${self.cost_usd:.4f}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": round(self.cost_usd, 6),
        }


@valueclass
class RunResult:
    """Everything a caller (the CLI, an outer loop) needs to know about a finished run."""

    outcome: Outcome
    reason: str
    iterations: int
    tasks: tuple[TaskResult, ...]
    run_id: str
    run_dir: str
    usage: UsageTotals = UsageTotals()
    duration_s: float = 0.0
    code: str = ""
    last_failure: str = ""  # the feedback of the last failed observation, if any
    diff_stat: tuple[str, ...] = ()  # files changed since the base
    pending_approvals: tuple[str, ...] = ()
    diff: str = ""  # the diff so far (capped), for runs that do not finish
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    # an outer loop's summary tree: one record per task (template, outcome, iterations, ...)
    subloops: tuple[dict[str, Any], ...] = ()
    # act.agent: the CLI's turns added up (calls, turns, tool_calls, denials, tokens, ...)
    agent: dict[str, Any] = field(default_factory=dict, compare=False)
    # per observer: ids that failed at the baseline and still fail at the end
    still_failing: dict[str, list[str]] = field(default_factory=dict, compare=False)
    # held-out variants, once asked for: status, reason and counts (see loop/heldout.py)
    heldout: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.outcome]

    @property
    def finished(self) -> bool:
        return self.outcome == "done"

    @property
    def resumable(self) -> bool:
        """``looprun resume`` can continue it: interrupted, a runtime error, or an approval."""
        return self.outcome in ("interrupted", "error") or bool(self.pending_approvals)

    def summary(self) -> dict[str, Any]:
        """The ``--json`` object and ``summary.json``: plain data, stable keys."""
        out: dict[str, Any] = {
            "outcome": self.outcome,
            "reason": self.reason,
            "code": self.code,
            "exit_code": self.exit_code,
            "iterations": self.iterations,
            "tasks": [t.to_dict() for t in self.tasks],
            "run_id": self.run_id,
            "run_dir": self.run_dir,
            "usage": self.usage.to_dict(),
            "duration_s": round(self.duration_s, 3),
        }
        if not self.finished:
            out["state"] = {
                "tasks_completed": [t.id for t in self.tasks if t.outcome == "done"],
                "last_failure": self.last_failure,
                "changed_files": list(self.diff_stat),
                "pending_approvals": list(self.pending_approvals),
                "diff": self.diff,
            }
        else:
            out["changed_files"] = list(self.diff_stat)
        if self.still_failing:
            out["still_failing"] = {k: list(v) for k, v in self.still_failing.items()}
        if self.subloops:
            out["subloops"] = [dict(r) for r in self.subloops]
        if self.agent:
            out["agent"] = dict(self.agent)
        if self.heldout:
            out["heldout"] = dict(self.heldout)
        return out
