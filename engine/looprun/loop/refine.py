"""The refine tree: first match wins, nested lists are sub-trees, ``else`` always matches.

With no matching rule the decision is to retry with the observers' feedback. No decision
can declare success: only exit conditions on fresh observations do that.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from looprun.data.value import valueclass
from looprun.loop.feedback import with_unnamed
from looprun.template.expressions import Condition
from looprun.template.model import Action, Rule

DEFAULT_RULE = "(no rule matched: retry with the observers' feedback)"
DIFF_POLICY = "policy: diff within the act constraints"


@valueclass
class Decision:
    """What the refine tree (or the exit check) decided for one iteration."""

    kind: str  # retry | rollback | replan | escalate | abort
    message: str = ""  # rendered: feedback for retries, the reason for escalate/abort
    target: str | None = None  # rollback: last_green | base | previous
    rule: str = DEFAULT_RULE  # the fired rule's name (its id, or file:line), as explain shows it
    path: str = ""  # its position in the tree, numbered as `looprun explain` does: "4.2"
    condition: str = ""  # why it fired: the rule's condition as written, or "else"
    id: str = ""  # the fired rule's author-given id (`explain` names it so), if it has one

    @property
    def stops(self) -> bool:
        return self.kind in ("escalate", "abort")

    def fired(self) -> str:
        """Which rule decided, for a progress line: ``rule 3: progress.repeats == 2``."""
        if self.rule == "exit":
            return "exit conditions hold"
        if self.path:
            why = " ".join(self.condition.split())
            return f"rule {self.id or self.path}: " + (why if len(why) <= 60 else why[:59] + "…")
        if self.rule == DEFAULT_RULE:
            return "no rule matched"
        return self.rule

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.kind,
            "message": self.message,
            "target": self.target,
            "rule": self.rule,
            "path": self.path,
            "condition": self.condition,
            "id": self.id,
        }


def _match(
    rules: Sequence[Rule], context: Mapping[str, Any], prefix: str = ""
) -> tuple[Rule, str] | None:
    for i, rule in enumerate(rules, 1):
        if rule.condition is not None and not rule.condition.evaluate(context):
            continue
        path = f"{prefix}{i}"
        if rule.action is not None:
            return rule, path
        found = _match(rule.children, context, f"{path}.")
        if found is not None:
            return found
        # a matching sub-tree with no matching child falls through to the next sibling
    return None


def _render(action: Action, context: Mapping[str, Any], default: str) -> str:
    return action.message.render(context).strip() if action.message is not None else default


def decide(
    rules: Sequence[Rule],
    context: Mapping[str, Any],
    default_feedback: str,
    blocks: Mapping[str, str] | None = None,
) -> Decision:
    """Pick exactly one action for this iteration. ``blocks``: each failing observer's
    feedback, added to a retry message that does not read that observer."""
    found = _match(rules, context)
    if found is None or found[0].action is None:
        return Decision("retry", default_feedback)
    rule, path = found
    action = rule.action
    assert action is not None
    where = rule.name
    if action.kind == "retry" and action.message is not None and blocks:
        message = with_unnamed(
            _render(action, context, default_feedback), action.message.use.names, blocks
        )
    elif action.kind in ("retry", "rollback", "replan"):
        message = _render(action, context, default_feedback)
    else:
        message = _render(action, context, f"refine rule {action.kind}")
    target = action.target or ("last_green" if action.kind == "rollback" else None)
    why = str(rule.condition) if rule.condition is not None else "else"
    return Decision(action.kind, message, target, where, path, why, rule.id)


def check_exit(
    conditions: Sequence[Condition], facts: Mapping[str, Any], diff_violations: int = 0
) -> tuple[tuple[str, bool], ...]:
    """Each exit condition with its value; a diff policy violation never lets a task finish."""
    values = tuple((str(c), c.evaluate(facts)) for c in conditions)
    if diff_violations:
        values += ((DIFF_POLICY, False),)
    return values


def judge(
    rules: Sequence[Rule],
    facts: Mapping[str, Any],
    exit_values: Sequence[tuple[str, bool]],
    default_feedback: str,
    blocks: Mapping[str, str] | None = None,
) -> Decision:
    """``done`` when every exit condition holds, else the refine tree's decision.

    The tree sees ``exit.ok`` and ``exit.failed`` (the sources of the unmet conditions).
    """
    failed = [src for src, ok in exit_values if not ok]
    if not failed:
        return Decision(
            "done", "exit conditions hold", rule="exit", condition="all exit conditions hold"
        )
    context = {**facts, "exit": {"ok": False, "failed": failed}}
    return decide(rules, context, default_feedback, blocks)
