"""The refine tree: first match wins, nested lists are sub-trees, ``else`` always matches.

With no matching rule the decision is to retry with the observers' feedback. No decision
can declare success: only exit conditions on fresh observations do that.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from looprun.template.model import Action, Rule

DEFAULT_RULE = "(no rule matched: retry with the observers' feedback)"


@dataclass(frozen=True)
class Decision:
    kind: str  # retry | rollback | replan | escalate | abort
    message: str = ""  # rendered: feedback for retries, the reason for escalate/abort
    target: str | None = None  # rollback: last_green | base | previous
    rule: str = DEFAULT_RULE  # where the rule that fired sits, for journal and explain

    @property
    def stops(self) -> bool:
        return self.kind in ("escalate", "abort")

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.kind,
            "message": self.message,
            "target": self.target,
            "rule": self.rule,
        }


def _match(rules: Sequence[Rule], context: Mapping[str, Any]) -> Rule | None:
    for rule in rules:
        if rule.condition is not None and not rule.condition.evaluate(context):
            continue
        if rule.action is not None:
            return rule
        found = _match(rule.children, context)
        if found is not None:
            return found
        # a matching sub-tree with no matching child falls through to the next sibling
    return None


def _render(action: Action, context: Mapping[str, Any], default: str) -> str:
    return action.message.render(context).strip() if action.message is not None else default


def decide(rules: Sequence[Rule], context: Mapping[str, Any], default_feedback: str) -> Decision:
    """Pick exactly one action for this iteration."""
    rule = _match(rules, context)
    if rule is None or rule.action is None:
        return Decision("retry", default_feedback)
    action = rule.action
    where = str(rule.location if rule.condition is None else rule.condition.location)
    if action.kind in ("retry", "rollback", "replan"):
        message = _render(action, context, default_feedback)
    else:
        message = _render(action, context, f"refine rule {action.kind}")
    target = action.target or ("last_green" if action.kind == "rollback" else None)
    return Decision(action.kind, message, target, where)
