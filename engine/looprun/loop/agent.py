"""One act turn by an agent CLI, as the loop sees it: a request out, a report back.

The loop knows nothing of processes or output formats: an ``Actor`` (act/agents) runs the
CLI and returns an ``AgentReport``. The report is a claim - what the CLI says it did and
spent; the working tree is the fact, judged afterwards by the same observers, policy and
refine tree as the built-in tool loop. Usage counts against the run's limits per call.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from looprun.loop import limits as caps
from looprun.loop.outcome import Stop
from looprun.loop.state import LoopState
from looprun.loop.turn import Turn
from looprun.models.base import Message
from looprun.template.agents import EMPTY_FACTS
from looprun.template.model import ActSpec, Limits


@dataclass(frozen=True)
class AgentRequest:
    """What one act turn asks of the CLI."""

    prompt: str
    system: str
    iteration: int
    task_id: str
    timeout_s: float
    session_id: str = ""  # resume this CLI session; "" starts a fresh one
    # the usage the CLI reported for this session so far (running-total CLIs need it)
    session_usage: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class AgentReport:
    """What the CLI reported about one turn; ``error`` is normalised ("" when none)."""

    exit_code: int | None
    error: str = ""  # timeout | auth | rate_limit | server | max_turns | crashed | ...
    error_detail: str = ""
    turns: int = 0
    tool_calls: tuple[str, ...] = ()  # tool names in call order, the CLI's own names
    denials: tuple[str, ...] = ()  # tools the CLI refused to run (its permission rules)
    final_message: str = ""
    session_id: str = ""
    prompt_tokens: int = 0  # this call only
    completion_tokens: int = 0
    cost_usd: float = 0.0
    session_usage: Mapping[str, int] = field(default_factory=dict)  # running totals
    artifact: str = ""  # the raw output kept for this turn

    def facts(self) -> dict[str, Any]:
        return {
            "ran": True,
            "exit_code": self.exit_code,
            "error": self.error,
            "error_detail": self.error_detail,
            "turns": self.turns,
            "tool_calls": len(self.tool_calls),
            "tools": list(self.tool_calls),
            "denials": len(self.denials),
            "denied": list(self.denials),
            "final_message": self.final_message,
            "session_id": self.session_id,
            "tokens": self.prompt_tokens + self.completion_tokens,
            "cost_usd": self.cost_usd,
        }


def no_agent_facts() -> dict[str, Any]:
    """``agent`` before any CLI turn (or in a template without one): every fact empty."""
    return copy.deepcopy(EMPTY_FACTS)


def agent_turn(
    ports: Any,
    act: ActSpec,
    limits: Limits,
    state: LoopState,
    system: str,
    prompt: str,
    *,
    task_id: str,
    elapsed: Callable[[], float],
    iteration: int,
) -> tuple[Turn, AgentReport | None]:
    """Run the act turn through ``ports.actor``; charge what it reports to the run."""
    agent = act.agent
    assert agent is not None and ports.actor is not None
    turn = Turn(messages=[Message("user", prompt)])
    spent = state.spent(elapsed())
    turn.stop = caps.check_spent(limits, spent)
    if turn.stop is not None:
        return turn, None
    left = caps.remaining_time(limits, spent)
    timeout = agent.timeout_s if left is None else min(agent.timeout_s, left)
    session = state.agent_session if state.agent_session.get("task") == task_id else {}
    resume = agent.session == "resume"
    request = AgentRequest(
        prompt=prompt,
        system=system,
        iteration=iteration,
        task_id=task_id,
        timeout_s=timeout,
        session_id=str(session.get("id", "")) if resume else "",
        session_usage=dict(session.get("usage") or {}) if resume else {},
    )
    report: AgentReport = ports.actor.act(request)
    state.prompt_tokens += report.prompt_tokens
    state.completion_tokens += report.completion_tokens
    state.cost_usd += report.cost_usd
    add_to_totals(state.agent_totals, agent.cli, report)
    if resume and report.session_id:
        state.agent_session = {
            "task": task_id,
            "id": report.session_id,
            "usage": dict(report.session_usage),
        }
    turn.tokens = report.prompt_tokens + report.completion_tokens
    turn.cost_usd = report.cost_usd
    turn.tools = [f"{agent.cli}:{name}" for name in report.tool_calls]
    turn.actions = [*turn.tools, f"{agent.cli}:exit={report.exit_code}:{report.error}"]
    turn.messages.append(Message("assistant", report.final_message))
    ports.journal.event(
        "agent_turn",
        iteration=iteration,
        cli=agent.cli,
        artifact=report.artifact,
        **{k: v for k, v in report.facts().items() if k != "ran"},
        prompt_tokens=report.prompt_tokens,
        completion_tokens=report.completion_tokens,
    )
    if report.error == "timeout" and left is not None and timeout >= left:
        # the run's wall clock, not the turn's own timeout, cut it short
        turn.stop = Stop(
            "exhausted",
            f"timeout: the run's wall-time limit was reached during the {agent.cli} turn",
            "timeout",
        )
    return turn, report


TOTAL_COUNTS = ("calls", "turns", "tool_calls", "denials", "tokens")


def add_to_totals(totals: dict[str, Any], cli: str, report: AgentReport) -> None:
    """Fold one turn's report into the run's agent totals (kept in the loop state)."""
    facts = report.facts()
    totals["cli"] = cli
    totals["calls"] = int(totals.get("calls", 0)) + 1
    for key in ("turns", "tool_calls", "denials", "tokens"):
        totals[key] = int(totals.get(key, 0)) + int(facts[key])
    totals["cost_usd"] = float(totals.get("cost_usd", 0.0)) + report.cost_usd
    totals["last_error"] = report.error


def sum_totals(rows: Any) -> dict[str, Any]:
    """Several runs' agent totals added up (an outer loop's sub-loops)."""
    out: dict[str, Any] = {k: 0 for k in TOTAL_COUNTS} | {"cost_usd": 0.0}
    for row in rows:
        for key in TOTAL_COUNTS:
            out[key] += int(row.get(key, 0) or 0)
        out["cost_usd"] += float(row.get("cost_usd", 0.0) or 0.0)
    return out
