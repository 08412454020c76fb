"""A run as a reviewer reads it: plain frozen records, built from the run directory by
:mod:`looprun.report.read` and rendered as Markdown, HTML or JSON."""

from __future__ import annotations

from dataclasses import asdict, field
from typing import Any

from looprun.data.value import valueclass


@valueclass
class FileChange:
    """One file an iteration (or the run) changed; ``None`` counts mean binary."""

    path: str
    added: int | None
    removed: int | None


@valueclass
class Check:
    """One observer's result in one iteration, and its first failure if any."""

    name: str
    status: str  # ok | failed | error | skipped | not run
    summary: str  # the progress line's words: ``tests: FAILED (4 tests, 1 failed: ...)``
    first_failure: str = ""


@valueclass
class ToolCall:
    """One tool call of an act turn: what it touched, and whether it was refused."""

    tool: str
    target: str
    error: bool
    result: str = ""  # the first line of its result


@valueclass
class Iteration:
    """One act → observe → refine step."""

    number: int
    task: str
    task_iteration: int
    tool_calls: tuple[ToolCall, ...]
    files: tuple[FileChange, ...]
    checks: tuple[Check, ...]
    exit: tuple[tuple[str, bool], ...]
    decision: str  # done | retry | rollback | replan | escalate | abort
    rule: str  # where the rule that fired is written (file:line:col), or "exit"
    rule_path: str  # its position in the tree, as `looprun explain` numbers it
    rule_id: str  # its author-given id, the name `looprun explain` shows; "" without one
    why: str  # the condition that fired, "else", or why no rule applied
    message: str  # the decision's message: the feedback for the next turn, or the reason
    next: str  # what followed: the decision, or the stop's outcome
    next_reason: str
    tokens: int
    cost_usd: float
    policy: tuple[str, ...]  # refusals and diff violations
    diff: str
    diff_note: str = ""  # why the diff is missing or cut
    checkpoint: str = ""

    @property
    def tools(self) -> str:
        """``read_file×1, edit_file×2``."""
        counts: dict[str, int] = {}
        for call in self.tool_calls:
            counts[call.tool] = counts.get(call.tool, 0) + 1
        return ", ".join(f"{t}×{n}" for t, n in counts.items()) or "no tools"


@valueclass
class Task:
    id: str
    goal: str
    done_when: str
    outcome: str
    iterations: int


@valueclass
class Limit:
    name: str
    current: float | int | None
    max: float | int | None


@valueclass
class Subloop:
    """One node of an outer run's sub-loop tree; ``report`` is the sub-run itself."""

    id: str
    template: str
    outcome: str
    reason: str
    iterations: int
    tokens: int
    run_id: str = ""
    anchor: str = ""
    report: RunReport | None = None


@valueclass
class RunReport:
    """Everything the report shows, in the order a reviewer asks for it."""

    run_id: str
    template: str
    intent: str
    started: str
    duration_s: float
    models: dict[str, str]
    outcome: str
    reason: str
    code: str
    exit_code: int | None
    plan: tuple[Task, ...]
    iterations: tuple[Iteration, ...]
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    limits: tuple[Limit, ...]
    changed: tuple[FileChange, ...]
    standing: tuple[str, ...]  # where a run that did not finish stands
    next_step: str  # the command that continues it, if any
    subloops: tuple[Subloop, ...] = ()
    events: tuple[str, ...] = ()  # resumes, approvals, interruptions, warnings
    notes: tuple[str, ...] = field(default=())  # what could not be read

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["tokens"] = self.tokens
        for it, rec in zip(self.iterations, out["iterations"], strict=True):
            rec["tools"] = it.tools
            rec["exit"] = [{"condition": c, "value": v} for c, v in it.exit]
        for sub, rec in zip(self.subloops, out["subloops"], strict=True):
            rec["report"] = sub.report.to_dict() if sub.report is not None else None
        return {"report": "looprun-run", "version": 1, **out}
