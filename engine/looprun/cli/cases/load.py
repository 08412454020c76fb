"""Reading a ``looprun test`` case file: each case's facts and expectations, checked
against the template they test, every mistake a Problem at file:line:col."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from looprun.data.freeze import thaw
from looprun.data.value import valueclass
from looprun.errors import Location, Problem, TemplateError
from looprun.observe.base import COMMON_FACTS
from looprun.observe.registry import parser_facts
from looprun.template.compose import resolve_ref
from looprun.template.model import ACTION_KINDS, Template
from looprun.template.suggest import did_you_mean
from looprun.template.yamlpos import JsonPath, load_document

CASE_KEYS = ("name", "task", "facts", "expect", "description")
EXPECT_KEYS = ("rule", "action", "target", "message", "message_contains", "exit", "exit_failed")
# Engine names a case may set under `facts` (observers are the template's own names).
FACT_NAMES = (
    "intent",
    "inputs",
    "iteration",
    "progress",
    "policy",
    "budget",
    "subloops",
    "run",
    "baseline",
    "tasks",
    "agent",
)


@valueclass
class Case:
    """One ``looprun test`` case: given these facts, expect this decision."""

    name: str
    location: Location
    task: Any  # a task id, a mapping, or None for the first task
    facts: Mapping[str, Any]
    expect: Mapping[str, Any]
    expect_at: Mapping[str, Location]


def load_cases(path: Path, template: Template) -> list[Case]:
    """Parse and check a case file; every mistake is a Problem at file:line:col."""
    doc = load_document(path)
    problems: list[Problem] = []

    def bad(at: JsonPath, message: str, key: bool = False) -> None:
        loc = doc.key_at(at) if key else doc.value_at(at)
        problems.append(Problem(loc, message))

    data = doc.data
    raw = data.get("cases") if isinstance(data, dict) else data
    base: JsonPath = ("cases",) if isinstance(data, dict) else ()
    if isinstance(data, dict):
        for key in data:
            if key not in ("cases", "template", "description"):
                bad((key,), f"unknown key '{key}'{did_you_mean(key, ('cases',))}", key=True)
    if not isinstance(raw, list) or not raw:
        bad(base, "expected a non-empty list of cases (or a mapping with `cases:`)")
        raise TemplateError(problems)
    cases: list[Case] = []
    names: dict[str, Location] = {}
    for i, item in enumerate(raw):
        at: JsonPath = (*base, i)
        if not isinstance(item, dict):
            bad(at, "a case is a mapping with name, facts and expect")
            continue
        for key in item:
            if key not in CASE_KEYS:
                bad((*at, key), f"unknown case key '{key}'{did_you_mean(key, CASE_KEYS)}", True)
        name = item.get("name")
        if not isinstance(name, str) or not name.strip():
            bad(at, "a case needs a `name`")
            name = f"case {i + 1}"
        elif name in names:
            bad((*at, "name"), f"case name '{name}' is used twice (first at {names[name]})")
        names.setdefault(name, doc.value_at((*at, "name")))
        facts = item.get("facts", {})
        if not isinstance(facts, dict):
            bad((*at, "facts"), "`facts` is a mapping of observer and engine names")
            facts = {}
        _check_facts(facts, (*at, "facts"), template, bad)
        task = item.get("task")
        _check_task(task, (*at, "task"), template, bad)
        expect = item.get("expect")
        if not isinstance(expect, dict) or not expect:
            bad((*at, "expect") if "expect" in item else at, "a case needs an `expect` mapping")
            expect = {}
        _check_expect(expect, (*at, "expect"), bad, rule_paths(template))
        cases.append(
            Case(
                name=name,
                location=doc.value_at(at),
                task=task,
                facts=facts,
                expect=expect,
                expect_at={k: doc.value_at((*at, "expect", k)) for k in expect},
            )
        )
    if problems:
        raise TemplateError(sorted(problems, key=lambda p: (p.location.line, p.location.col)))
    return cases


def _check_facts(facts: dict[str, Any], at: JsonPath, template: Template, bad: Any) -> None:
    known = (*template.observe, *FACT_NAMES)
    for name, value in facts.items():
        where = (*at, name)
        if name in template.observe:
            if not isinstance(value, dict):
                bad(where, f"facts of observer '{name}' are a mapping such as {{ok: false}}")
                continue
            parser = template.observe[name].parser
            declared = parser_facts(parser, thaw(template.observe[name].options))
            if declared is None:
                continue
            allowed = declared | COMMON_FACTS
            for fact in value:
                if fact not in allowed:
                    hint = did_you_mean(fact, allowed)
                    bad(
                        (*where, fact),
                        f"observer '{name}' (parser {parser}) has no fact '{fact}'{hint}",
                        True,
                    )
        elif name == "inputs":
            if not isinstance(value, dict):
                bad(where, "`inputs` is a mapping of input names")
                continue
            for key in value:
                if key not in template.inputs and key != "intent":
                    bad(
                        (*where, key),
                        f"no input named '{key}'{did_you_mean(key, template.inputs)}",
                        True,
                    )
        elif name == "iteration":
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                bad(where, "`iteration` is a number from 1")
        elif name in FACT_NAMES:
            if name != "intent" and not isinstance(value, dict):
                bad(where, f"`{name}` is a mapping")
        else:
            hint = did_you_mean(name, known)
            extra = " (the task is given with `task:` beside `facts`)" if name == "task" else ""
            bad(where, f"unknown name '{name}'{hint}{extra}", True)


def _check_task(task: Any, at: JsonPath, template: Template, bad: Any) -> None:
    ids = [t.id for t in template.plan.tasks]
    if task is None:
        return
    if isinstance(task, str):
        if ids and task not in ids:
            bad(
                at,
                f"no task '{task}' in the plan{did_you_mean(task, ids)} (tasks: {', '.join(ids)})",
            )
        return
    if not isinstance(task, dict):
        bad(at, "`task` is a task id or a mapping (id, goal, paths, attempt, done_when)")
        return
    if "id" not in task:
        bad(at, "a task mapping needs an `id`")


def rule_paths(template: Template) -> dict[str, str]:
    """Every rule that holds an action: its position in the tree, numbered as explain
    numbers it, to its name (its ``id``, or file:line). A case names a rule either way."""
    out: dict[str, str] = {}

    def walk(rules: Sequence[Any], prefix: str) -> None:
        for i, rule in enumerate(rules, 1):
            if rule.action is not None:
                out[f"{prefix}{i}"] = rule.name
            walk(rule.children, f"{prefix}{i}.")

    walk(template.refine, "")
    return out


def wanted_rule(value: Any, paths: Mapping[str, str]) -> str:
    """The name of the rule a case expects (given by name or by position)."""
    text = str(value).strip()
    return paths.get(text.rstrip("."), text)


def _check_expect(expect: dict[str, Any], at: JsonPath, bad: Any, paths: Mapping[str, str]) -> None:
    for key, value in expect.items():
        where = (*at, key)
        if key not in EXPECT_KEYS:
            bad(where, f"unknown expectation '{key}'{did_you_mean(key, EXPECT_KEYS)}", True)
        elif key == "action" and value not in (*ACTION_KINDS, "done"):
            bad(where, f"action is one of {', '.join((*ACTION_KINDS, 'done'))}")
        elif key == "exit" and not isinstance(value, bool):
            bad(where, "`exit` is true or false (whether the exit conditions hold)")
        elif key == "rule" and not isinstance(value, (str, int, float)):
            bad(where, "`rule` is a rule's name (its id, or file:line) or its position (4.2)")
        elif key == "rule" and wanted_rule(value, paths) not in (
            *paths.values(),
            "exit",
            "none",
        ):
            names = ", ".join(paths.values()) or "none"
            hint = did_you_mean(str(value), list(paths.values()))
            bad(
                where,
                f"no rule with an action named {value}{hint} (rules: {names}; "
                "or `exit` when the exit conditions hold, `none` when no rule matches)",
            )
        elif key in ("message", "target") and not isinstance(value, str):
            bad(where, f"`{key}` is a string")
        elif key in ("message_contains", "exit_failed"):
            items = value if isinstance(value, list) else [value]
            if not all(isinstance(v, str) for v in items):
                bad(where, f"`{key}` is a string or a list of strings")


def template_of(case_file: str) -> str:
    """The template a case file names with ``template:`` (relative to it, or built-in)."""
    path = Path(case_file)
    doc = load_document(path)
    ref = doc.data.get("template") if isinstance(doc.data, dict) else None
    if not isinstance(ref, str) or not ref.strip():
        raise TemplateError(
            [
                Problem(
                    doc.start,
                    "name the template: `looprun test TEMPLATE "
                    "CASES...`, or `template:` in the case file",
                )
            ]
        )
    target = resolve_ref(ref, path.parent)
    if target is None:
        raise TemplateError([Problem(doc.value_at(("template",)), f"no template '{ref}'")])
    return str(target)
