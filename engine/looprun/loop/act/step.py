"""The act step: one protocol, three strategies.

An iteration's act step changes the working tree; the observers then judge the tree,
whatever did the changing. Three strategies implement it: a tool turn of the act model
(``tool_turn.ToolTurn``), a turn of an agent CLI (``agent_turn.AgentTurn``), and an outer
loop's sub-loops (``looprun.run.subloops.SubLoops``, assembled where real parts are,
because each sub-loop is a whole run). The engine calls the same five members of each.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from looprun.data.value import valueclass
from looprun.loop.core import Loop
from looprun.loop.facts import NO_SUBLOOPS
from looprun.loop.feedback import attempts_summary
from looprun.loop.outcome import Stop
from looprun.loop.plan import PlannedTask
from looprun.loop.policy_step import PolicyFindings
from looprun.loop.refine import Decision
from looprun.models.base import Message

DEFAULT_SYSTEM = (
    "You are a careful software engineer working in a repository through tools. "
    "Make the change the task asks for; the engine checks your work by running real checks."
)


@dataclass
class Turn:
    """What one act turn did."""

    messages: list[Message] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)  # names, in call order
    actions: list[str] = field(default_factory=list)  # normalised, for the fingerprint
    refusals: list[dict[str, Any]] = field(default_factory=list)
    tokens: int = 0
    cost_usd: float = 0.0
    stop: Stop | None = None


@valueclass
class Acted:
    """One act step's result: the turn, and the facts it adds (``agent``) if any."""

    turn: Turn
    facts: Mapping[str, Any] = field(default_factory=dict)


class ActStep(Protocol):
    """How one loop acts; the engine knows no other difference between strategies."""

    # what an attempt line names: the task, or (an outer loop) "sub-loops"
    def subject(self, task: PlannedTask) -> str: ...

    def act(self, task: PlannedTask, iteration: int, ctx: Mapping[str, Any]) -> Acted:
        """Change the tree for ``task``; ``ctx`` holds the facts prompts render with."""
        ...

    def settle(self, decision: Decision, policy: PolicyFindings) -> Decision:
        """The refine tree's decision, or the strategy's own where it must overrule it."""
        ...

    def cannot_run(self, iteration: int) -> str:
        """Why this iteration's checks could not run (no edit can fix it), or ""."""
        ...

    def apply(self, task: PlannedTask, decision: Decision) -> tuple[bool, Stop | None]:
        """The strategy's own meaning of a decision: (handled, stop)."""
        ...

    def facts(self) -> Mapping[str, Any]:
        """What templates read as ``subloops``."""
        ...

    def tree(self) -> tuple[dict[str, Any], ...]:
        """The summary's tree of sub-loops (empty for a turn)."""
        ...


class TurnStep:
    """What the two turn strategies share: one task at a time, no sub-loops."""

    def __init__(self, loop: Loop):
        self.loop = loop

    def subject(self, task: PlannedTask) -> str:
        return task.id

    def settle(self, decision: Decision, policy: PolicyFindings) -> Decision:
        return decision

    def cannot_run(self, iteration: int) -> str:
        return ""

    def apply(self, task: PlannedTask, decision: Decision) -> tuple[bool, Stop | None]:
        return False, None

    def facts(self) -> Mapping[str, Any]:
        return NO_SUBLOOPS

    def tree(self) -> tuple[dict[str, Any], ...]:
        return ()

    def system(self, ctx: Mapping[str, Any]) -> str:
        """The pinned system message: the template's (or the default) and past attempts."""
        act, st = self.loop.template.act, self.loop.state
        assert act is not None
        text = act.system.render(ctx).strip() if act.system is not None else DEFAULT_SYSTEM
        summary = attempts_summary(st.attempts, earlier=st.attempts_earlier)
        return text + ("\n\n" + summary if summary else "")

    def prompt(self, ctx: Mapping[str, Any]) -> str:
        """The task's prompt; the last check's feedback follows unless the prompt places it."""
        act = self.loop.template.act
        assert act is not None
        text = act.prompt.render(ctx).strip()
        fb = self.loop.state.feedback
        if fb and "feedback" not in act.prompt.use.names:
            text += f"\n\nFeedback from the last check:\n{fb}"
        return text
