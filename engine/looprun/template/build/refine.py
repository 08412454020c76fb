"""``refine``: the rule tree - conditions, nested rules, actions and their messages -
with rules no earlier rule leaves reachable reported.
"""

from __future__ import annotations

from typing import Any

from looprun.template.build.reader import Reader
from looprun.template.model import ACTION_KINDS, Action, Rule
from looprun.template.semantic import RuleOrder, subtree_problems
from looprun.template.yamlpos import JsonPath

ROLLBACK_TARGETS = ("last_green", "base", "previous")


def build_refine(r: Reader) -> list[Rule]:
    raw = r.get(("refine",), list)
    if raw is None:
        return []
    return _rules(r, raw, ("refine",), top=True)


def _rules(r: Reader, raw: list[Any], path: JsonPath, *, top: bool) -> list[Rule]:
    out: list[Rule] = []
    order = RuleOrder()
    for i, rule in enumerate(raw):
        rpath = (*path, i)
        if not isinstance(rule, dict):
            continue
        line = r.at(rpath).line
        unreachable = order.unreachable()
        if unreachable is not None:
            r.problem(rpath, unreachable)
        built = _rule(r, rule, rpath)
        if built is None:
            continue
        out.append(built)
        if_path: JsonPath = (*rpath, "if")
        for message in order.add(built, line, lambda p=if_path: r.at(p).line):
            r.problem(if_path, message)
    for message in subtree_problems(raw, top=top):
        r.problem(path, message)
    return out


def _rule(r: Reader, raw: dict[str, Any], path: JsonPath) -> Rule | None:
    has_if, has_then, has_else = "if" in raw, "then" in raw, "else" in raw
    if has_else and (has_if or has_then):
        r.problem(path, "a rule is either `if`/`then` or `else`, not both")
        return None
    if has_if and not has_then:
        r.problem(path, "rule has `if` but no `then` (an action or a list of rules)")
        return None
    if has_then and not has_if:
        r.problem(path, "rule has `then` but no `if`; use `else` for an unconditional rule")
        return None
    if not (has_if or has_else):
        return None
    key = "then" if has_then else "else"
    rid = _rule_id(r, raw, path)
    cond = r.condition((*path, "if"), what="a refine condition") if has_if else None
    body = raw[key]
    why = " ".join(str(raw.get("description") or "").split())
    if isinstance(body, list):
        children = _rules(r, body, (*path, key), top=False)
        if has_if and cond is None:
            return None
        return Rule(cond, None, tuple(children), r.at(path), why, rid)
    action = _action(r, body, (*path, key))
    if action is None or (has_if and cond is None):
        return None
    return Rule(cond, action, (), r.at(path), why, rid)


def _rule_id(r: Reader, raw: dict[str, Any], path: JsonPath) -> str:
    """The rule's explicit id, checked unique across the whole tree."""
    rid = raw.get("id")
    if not isinstance(rid, str):
        return ""
    first = r.rule_ids.get(rid)
    if first is not None:
        r.problem((*path, "id"), f"rule id '{rid}' is used twice (first at {first})")
    else:
        r.rule_ids[rid] = r.at((*path, "id"))
    return rid


def _action(r: Reader, raw: Any, path: JsonPath) -> Action | None:
    loc = r.at(path)
    if isinstance(raw, str):
        if raw not in ACTION_KINDS:
            return None  # the schema reports it
        target = "last_green" if raw == "rollback" else None
        return Action(raw, None, target, loc)  # type: ignore[arg-type]
    if not isinstance(raw, dict):
        return None
    kinds = [k for k in raw if k in ACTION_KINDS]
    if len(kinds) != 1:
        if not kinds:
            r.problem(path, f"no action: give one of {', '.join(ACTION_KINDS)}")
        else:
            r.problem(path, f"one action per rule, got {len(kinds)}: {', '.join(kinds)}")
        return None
    kind = kinds[0]
    value = raw[kind]
    target = None
    message_path: JsonPath | None = None
    if kind == "rollback":
        target = value if value in ROLLBACK_TARGETS else "last_green"
    elif value is not None:
        message_path = (*path, kind)
    if "feedback" in raw:
        if message_path is not None:
            r.problem(
                (*path, "feedback"),
                f"give the message once: as the `{kind}` value or as `feedback`",
            )
            return None
        message_path = (*path, "feedback")
    message = None
    if message_path is not None:
        message = r.text(message_path, r.message_names, "a refine message")
        if message is None:
            return None
    return Action(kind, message, target, loc)  # type: ignore[arg-type]
