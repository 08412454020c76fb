"""What a template decides for one case, by the engine's own code (``loop.refine``), and
how that differs from what the case expects."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from looprun.cli.cases.facts import facts_for
from looprun.cli.cases.load import Case, rule_paths, wanted_rule
from looprun.data.value import valueclass
from looprun.errors import ExpressionError, TemplateError
from looprun.loop.feedback import compose, observer_blocks
from looprun.loop.refine import Decision, check_exit, judge
from looprun.observe.base import Observation
from looprun.template.model import Template


@valueclass
class Outcome:
    """What the template decided for one case, and how it differs from the expectation."""

    case: Case
    decision: Decision | None
    exit_values: tuple[tuple[str, bool], ...]
    mismatches: tuple[str, ...]
    error: str = ""

    @property
    def passed(self) -> bool:
        return not self.mismatches and not self.error


def evaluate(case: Case, template: Template) -> Outcome:
    try:
        facts, done_when = facts_for(case, template)
        conditions = template.exit + ((done_when,) if done_when is not None else ())
        policy = facts["policy"]
        diff_violations = policy.get("diff_violations") or 0
        exit_values = check_exit(conditions, facts, diff_violations)
        failed = [src for src, ok in exit_values if not ok]
        observations = {
            name: Observation(
                template.observe[name].parser,
                ok=bool(facts[name].get("ok")),
                ran=bool(facts[name].get("ran", True)),
                feedback=str(facts[name].get("feedback") or ""),
                error=facts[name].get("error"),
            )
            for name in template.observe
        }
        feedback = compose(observations, str(policy.get("summary") or ""), failed)
        blocks = observer_blocks(observations)
        decision = judge(template.refine, facts, exit_values, feedback, blocks)
    except (ExpressionError, TemplateError) as exc:
        return Outcome(case, None, (), (), error=str(exc))
    mismatches = _mismatches(case, decision, exit_values, rule_paths(template))
    return Outcome(case, decision, exit_values, tuple(mismatches))


def _rule_name(d: Decision) -> str:
    if d.kind == "done":
        return "exit"
    return d.rule if d.path else "none"


def _mismatches(
    case: Case,
    d: Decision,
    exit_values: Sequence[tuple[str, bool]],
    paths: Mapping[str, str],
) -> list[str]:
    e, out = case.expect, []
    holds = all(ok for _, ok in exit_values)
    failed = [src for src, ok in exit_values if not ok]
    if "rule" in e and wanted_rule(e["rule"], paths) != _rule_name(d):
        out.append(f"rule: expected {wanted_rule(e['rule'], paths)}, got {_rule_name(d)}")
    if "action" in e and e["action"] != d.kind:
        out.append(f"action: expected {e['action']}, got {d.kind}")
    if "target" in e and e["target"] != d.target:
        out.append(f"target: expected {e['target']}, got {d.target}")
    if "message" in e and str(e["message"]).strip() != d.message:
        out.append(f"message: expected {str(e['message']).strip()!r}, got {d.message!r}")
    if "message_contains" in e:
        wanted = e["message_contains"]
        for part in wanted if isinstance(wanted, list) else [wanted]:
            if part not in d.message:
                out.append(f"message: expected it to contain {part!r}, got {d.message!r}")
    if "exit" in e and e["exit"] != holds:
        out.append(
            f"exit: expected {'hold' if e['exit'] else 'not to hold'}, "
            f"got {'hold' if holds else 'failing: ' + '; '.join(failed)}"
        )
    if "exit_failed" in e:
        wanted = e["exit_failed"] if isinstance(e["exit_failed"], list) else [e["exit_failed"]]
        if sorted(" ".join(w.split()) for w in wanted) != sorted(failed):
            out.append(f"exit_failed: expected {wanted}, got {failed}")
    return out


def describe(d: Decision) -> str:
    if d.kind == "done":
        return "done (every exit condition holds)"
    where = f"rule {d.rule} ({d.path})" if d.path else d.rule
    target = f" to {d.target}" if d.kind == "rollback" else ""
    message = f": {d.message!r}" if d.message else ""
    return f"{where} -> {d.kind}{target}{message}"
