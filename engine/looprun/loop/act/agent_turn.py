"""One act turn by an agent CLI, as the loop sees it: a request out, a report back.

The loop knows nothing of processes or output formats: an ``Actor`` (act/agents) runs the
CLI and returns an ``AgentReport``. The report is a claim - what the CLI says it did and
spent; the working tree is the fact, judged afterwards by the same observers, policy and
refine tree as the built-in tool loop. Usage counts against the run's limits per call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from looprun.loop import limits as caps
from looprun.loop.act.step import Acted, Turn, TurnStep
from looprun.loop.outcome import Stop
from looprun.loop.plan import PlannedTask
from looprun.loop.policy_step import PolicyFindings
from looprun.loop.ports import AgentReport, AgentRequest
from looprun.loop.refine import Decision
from looprun.loop.state import LoopState
from looprun.models.base import Message
from looprun.template.model import ActSpec, Limits


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


class AgentTurn(TurnStep):
    """An agent CLI acts (``act.agent``); what it reports is a claim, the tree the fact."""

    reported = False  # the CLI ran this iteration (a cap may stop the turn before it)

    def act(self, task: PlannedTask, iteration: int, ctx: Mapping[str, Any]) -> Acted:
        lp = self.loop
        assert lp.template.act is not None
        turn, report = agent_turn(
            lp.ports,
            lp.template.act,
            lp.limits,
            lp.state,
            self.system(ctx),
            self.prompt(ctx),
            task_id=task.id,
            elapsed=lp.elapsed,
            iteration=iteration,
        )
        self.reported = report is not None
        return Acted(turn, {"agent": report.facts()} if report is not None else {})

    def settle(self, decision: Decision, policy: PolicyFindings) -> Decision:
        """A turn that broke the policy is undone, whatever the refine tree says: the CLI
        acted on its own, so the engine cannot refuse its edits one by one."""
        if self.reported and policy.diff_violations and decision.kind == "retry":
            return Decision(
                "rollback",
                "Your last turn broke a rule of this template and was undone:\n" + policy.summary,
                "previous",
                "(act.agent: a policy violation in the diff rolls the turn back)",
            )
        return decision


def add_to_totals(totals: dict[str, Any], cli: str, report: AgentReport) -> None:
    """Fold one turn's report into the run's agent totals (kept in the loop state)."""
    facts = report.facts()
    totals["cli"] = cli
    totals["calls"] = int(totals.get("calls", 0)) + 1
    for key in ("turns", "tool_calls", "denials", "tokens"):
        totals[key] = int(totals.get(key, 0)) + int(facts[key])
    totals["cost_usd"] = float(totals.get("cost_usd", 0.0)) + report.cost_usd
    totals["last_error"] = report.error
