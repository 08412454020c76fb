"""The loop's resumable state: what must survive a crash to continue where it stopped.

This is the one mutable record of a run. It is saved atomically after every completed
step (plan, iteration, stop), and a resumed run starts from it: the working tree is
restored to ``current`` and the scripted model seeks back to its saved position, so an
interrupted iteration is redone once, never half-applied and never applied twice.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from looprun.loop.limits import Spent
from looprun.loop.plan import PlannedTask
from looprun.loop.progress import Progress
from looprun.models.base import Message, ToolCall

STATE_VERSION = 1


def message_to_dict(m: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls:
        out["tool_calls"] = [
            {
                "id": c.id,
                "name": c.name,
                "arguments": dict(c.arguments) if c.arguments else None,
                "raw_arguments": c.raw_arguments,
                "error": c.error,
            }
            for c in m.tool_calls
        ]
    if m.tool_call_id is not None:
        out["tool_call_id"] = m.tool_call_id
    if m.is_error:
        out["is_error"] = True
    return out


def message_from_dict(d: Mapping[str, Any]) -> Message:
    calls = tuple(
        ToolCall(c["id"], c["name"], c.get("arguments"), c.get("raw_arguments", ""), c.get("error"))
        for c in d.get("tool_calls") or ()
    )
    return Message(
        d["role"], d.get("content", ""), calls, d.get("tool_call_id"), bool(d.get("is_error"))
    )


@dataclass
class LoopState:
    """Everything a resumed run needs; mutated by the engine, saved after every step."""

    base: str = ""  # tree of the start state
    current: str = ""  # checkpoint the next iteration starts from
    previous: str = ""  # checkpoint before the last iteration
    last_green: str = ""  # last checkpoint where every observer was ok
    task_start: str = ""  # checkpoint the current task started from
    tasks: list[PlannedTask] | None = None
    task_index: int = 0
    task_iteration: int = 0  # iterations done in the current task
    task_attempt: int = 1  # restarts of the current task (replan in static mode)
    task_results: list[dict[str, Any]] = field(default_factory=list)
    iterations: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    elapsed_s: float = 0.0
    per_tool: dict[str, int] = field(default_factory=dict)
    last_tokens: int = 0
    last_cost_usd: float = 0.0
    last_duration_s: float = 0.0
    progress: Progress = field(default_factory=Progress)
    feedback: str = ""
    last_failure: str = ""
    attempts: list[str] = field(default_factory=list)  # the last few attempt lines
    attempts_earlier: int = 0  # attempt lines dropped from ``attempts``, counted
    rounds: list[list[Message]] = field(default_factory=list)
    last_facts: dict[str, Any] = field(default_factory=dict)  # observer facts, for prompts
    # observer facts (without items) before the first act turn; None: not observed
    baseline: dict[str, Any] | None = None
    # per completed task id: its observer and baseline facts when it was done (``tasks``)
    done_facts: dict[str, Any] = field(default_factory=dict)
    approved: list[str] = field(default_factory=list)
    pending: dict[str, Any] | None = None  # an approval waiting for a person
    model_positions: dict[str, int] = field(default_factory=dict)
    # act.agent with session: resume - the CLI's session for the current task and the
    # usage it has reported so far (some CLIs report running totals, not per call)
    agent_session: dict[str, Any] = field(default_factory=dict)
    # act.agent: what the CLI's turns added up to over the run (calls, turns, tool calls,
    # denials, tokens, cost, the last error), for an outer loop and the summary
    agent_totals: dict[str, Any] = field(default_factory=dict)
    # The journal's last event seq when this state was saved: events after it belong to
    # a step this state does not hold, which a resumed run redoes (they are superseded).
    journal_seq: int = 0
    # How many model exchanges were recorded when this state was saved (-1: unknown):
    # the calls after them were paid for, and a resumed run counts them.
    exchanges: int = -1
    # held-out variants (``heldout``): status, reason and counts, never their content
    heldout: dict[str, Any] = field(default_factory=dict)
    stop: dict[str, Any] | None = None  # set once the run has ended
    # --commit after a done run: {parent, message, paths} before committing, then sha
    # (or {skipped: why}); see the CLI's commit step
    commit: dict[str, Any] | None = None

    def spent(self, elapsed_s: float) -> Spent:
        return Spent(
            iterations=self.iterations,
            tokens=self.prompt_tokens + self.completion_tokens,
            cost_usd=self.cost_usd,
            elapsed_s=elapsed_s,
            per_tool=dict(self.per_tool),
            last_tokens=self.last_tokens,
            last_cost_usd=self.last_cost_usd,
            last_duration_s=self.last_duration_s,
        )

    def to_dict(self) -> dict[str, Any]:
        special = {"tasks", "progress", "rounds"}
        data = {
            k: copy.deepcopy(getattr(self, k))
            for k in self.__dataclass_fields__
            if k not in special
        }
        data["version"] = STATE_VERSION
        data["tasks"] = None if self.tasks is None else [t.to_dict() for t in self.tasks]
        data["progress"] = {
            "fingerprint": self.progress.fingerprint,
            "repeats": self.progress.repeats,
        }
        data["rounds"] = [[message_to_dict(m) for m in r] for r in self.rounds]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LoopState:
        d = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        if d.get("tasks") is not None:
            d["tasks"] = [PlannedTask.from_dict(t) for t in d["tasks"]]
        d["progress"] = Progress(**(d.get("progress") or {}))
        d["rounds"] = [[message_from_dict(m) for m in r] for r in d.get("rounds") or []]
        return cls(**d)
