"""`looprun test`: unit tests for a template's decisions - given these facts, this rule fires.

A case file lists cases; each gives the facts of one iteration (observer facts, progress,
policy, task, iteration, inputs, ...) and what must follow: which refine rule fires (its
position in the tree, numbered as ``looprun explain`` numbers it), the action, the
rendered message, whether the exit conditions hold. The decision is computed by the
engine's own code (``loop.refine``), so a passing case is what a run would do.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from looprun.data.freeze import thaw
from looprun.errors import EXIT_DONE, EXIT_ERROR, ExpressionError, Location, Problem, TemplateError
from looprun.loop.feedback import compose, observer_blocks
from looprun.loop.refine import Decision, check_exit, judge
from looprun.observe.base import COMMON_FACTS, Observation
from looprun.observe.registry import get_parser, parser_facts
from looprun.template.agents import EMPTY_FACTS
from looprun.template.expressions import Condition
from looprun.template.model import ACTION_KINDS, Template
from looprun.template.suggest import did_you_mean
from looprun.template.yamlpos import JsonPath, load_document

Echo = Callable[..., None]

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
_EMPTY_BY_TYPE: dict[str, Any] = {
    "string": "",
    "command": "",
    "integer": 0,
    "number": 0,
    "boolean": False,
    "list": [],
}


@dataclass(frozen=True)
class Case:
    """One ``looprun test`` case: given these facts, expect this decision."""

    name: str
    location: Location
    task: Any  # a task id, a mapping, or None for the first task
    facts: Mapping[str, Any]
    expect: Mapping[str, Any]
    expect_at: Mapping[str, Location]


@dataclass(frozen=True)
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


# -- reading a case file --------------------------------------------------------------------


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


def _wanted_rule(value: Any, paths: Mapping[str, str]) -> str:
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
        elif key == "rule" and _wanted_rule(value, paths) not in (
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


# -- evaluating a case ------------------------------------------------------------------------


def _merged(default: Mapping[str, Any], given: Any) -> dict[str, Any]:
    return {**default, **(given if isinstance(given, Mapping) else {})}


def _clean_facts(template: Template) -> dict[str, dict[str, Any]]:
    """Every observer as a clean pass with the parser's empty facts."""
    out = {}
    for name, spec in template.observe.items():
        try:
            empty = dict(getattr(get_parser(spec.parser), "empty_facts", None) or {})
        except Exception:
            empty = {}
        out[name] = Observation(spec.parser, ok=True, exit_code=0, facts=empty).to_facts()
    return out


def _observer_facts(template: Template, given: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Every observer: a clean pass with the parser's empty facts, then the case's facts."""
    return {name: _merged(clean, given.get(name)) for name, clean in _clean_facts(template).items()}


def _baseline_and_tasks(
    template: Template,
    given: Mapping[str, Any],
    observed: Mapping[str, Any],
    index: int,
    context: Mapping[str, Any],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``baseline`` (a clean pass unless the case says otherwise; comparisons computed
    from the case's facts unless given) and ``tasks`` (a clean record for every static
    task before the case's, then the case's)."""
    from looprun.loop.baseline import COMPARISONS, baseline_facts, no_comparisons, slim
    from looprun.loop.plan import static_tasks

    clean = _clean_facts(template)
    given_base = given.get("baseline") if isinstance(given.get("baseline"), Mapping) else {}
    state = {n: _merged(slim(c), given_base.get(n)) for n, c in clean.items()}
    baseline = baseline_facts(template.observe, state, observed, clean)
    for name, facts in given_base.items():
        if name in baseline and isinstance(facts, Mapping):
            baseline[name].update({k: v for k, v in facts.items() if k in COMPARISONS})
    empty_record = {
        **{n: slim(c) for n, c in clean.items()},
        "baseline": {n: no_comparisons() for n in clean},
    }
    try:
        earlier = [t.id for t in static_tasks(template, context)][: max(index, 0)]
    except Exception:
        earlier = []
    tasks: dict[str, Any] = {tid: empty_record for tid in earlier}
    given_tasks = given.get("tasks") if isinstance(given.get("tasks"), Mapping) else {}
    for tid, record in given_tasks.items():
        tasks[tid] = _deep_merged(tasks.get(tid, empty_record), record)
    return baseline, tasks


def _deep_merged(default: Mapping[str, Any], given: Any) -> dict[str, Any]:
    out = dict(default)
    for key, value in (given if isinstance(given, Mapping) else {}).items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _deep_merged(out[key], value)
        else:
            out[key] = value
    return out


def _task(case: Case, template: Template, context: Mapping[str, Any]) -> tuple[dict, Any]:
    from looprun.loop.plan import static_tasks

    planned = static_tasks(template, context)
    raw = case.task
    wanted = raw.get("id") if isinstance(raw, Mapping) else raw
    index = next((i for i, t in enumerate(planned) if t.id == wanted), 0 if wanted is None else -1)
    task = planned[index] if index >= 0 else None
    facts = {
        "id": wanted or (task.id if task else "main"),
        "goal": task.goal if task else str(wanted),
        "paths": list(task.paths) if task else [],
        "attempt": 1,
        "index": index + 1 if index >= 0 else 1,
        "count": len(planned),
    }
    done_when: Condition | None = task.done_when if task else None
    if isinstance(raw, Mapping):
        facts.update({k: v for k, v in raw.items() if k != "done_when"})
        if raw.get("done_when"):
            from looprun.template.expressions import compile_condition

            done_when = compile_condition(str(raw["done_when"]), case.location)
    return facts, done_when


def facts_for(case: Case, template: Template) -> tuple[dict[str, Any], Condition | None]:
    """The expression context of one iteration, as the engine builds it, from a case."""
    from looprun.loop.limits import Spent, budget_facts

    given = case.facts
    inputs = {
        n: thaw(s.default) if s.default is not None else _EMPTY_BY_TYPE.get(s.type, "")
        for n, s in template.inputs.items()
    }
    inputs = _merged(inputs, given.get("inputs"))
    intent = given.get("intent", inputs.get("intent") or "the intent")
    inputs["intent"] = intent
    run = _merged(
        {
            "id": "test",
            "dir": ".looprun/runs/test",
            "artifacts": ".looprun/runs/test/artifacts",
            "workdir": ".",
        },
        given.get("run"),
    )
    base = {"intent": intent, "inputs": inputs, "run": run}
    task, done_when = _task(case, template, base)
    iteration = given.get("iteration", 1)
    observed = _observer_facts(template, given)
    baseline, tasks = _baseline_and_tasks(template, given, observed, task["index"] - 1, base)
    context: dict[str, Any] = {
        **observed,
        **base,
        "baseline": baseline,
        "tasks": tasks,
        "iteration": iteration,
        "task": task,
        "progress": _merged(
            {"fingerprint": "", "repeats": 1, "changed": True}, given.get("progress")
        ),
        "policy": _merged(
            {
                "violations": 0,
                "diff_violations": 0,
                "summary": "",
                "items": [],
                "diff_lines": 0,
                "pending_approvals": [],
            },
            given.get("policy"),
        ),
        "budget": _merged(
            budget_facts(template.limits, Spent(iterations=iteration - 1)), given.get("budget")
        ),
        "exit": {"ok": False, "failed": []},
        "agent": _merged(copy.deepcopy(EMPTY_FACTS), given.get("agent")),
        "subloops": _merged(
            {"all_done": True, "failed": 0, "counts": {}, "list": []}, given.get("subloops")
        ),
        "feedback": "",
    }
    return context, done_when


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
    if "rule" in e and _wanted_rule(e["rule"], paths) != _rule_name(d):
        out.append(f"rule: expected {_wanted_rule(e['rule'], paths)}, got {_rule_name(d)}")
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


# -- the command ------------------------------------------------------------------------------


def describe(d: Decision) -> str:
    if d.kind == "done":
        return "done (every exit condition holds)"
    where = f"rule {d.rule} ({d.path})" if d.path else d.rule
    target = f" to {d.target}" if d.kind == "rollback" else ""
    message = f": {d.message!r}" if d.message else ""
    return f"{where} -> {d.kind}{target}{message}"


def template_of(case_file: str) -> str:
    """The template a case file names with ``template:`` (relative to it, or built-in)."""
    from looprun.template.compose import resolve_ref

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


def run_case_files(
    case_files: Sequence[str], template_ref: str | None = None, echo: Echo = print
) -> int:
    """Run every case of every file, against ``template_ref`` or each file's own
    ``template:``; 0 when all pass, 1 when any fails. Bad files raise TemplateError."""
    from looprun.template.loader import load_template

    if template_ref is not None:
        return run_cases(template_ref, case_files, echo)
    problems: list[Problem] = []
    loaded = []
    for f in case_files:
        try:
            template = load_template(template_of(f))
            loaded.append((template, load_cases(Path(f), template)))
        except TemplateError as exc:
            problems.extend(exc.problems)
    if problems:
        raise TemplateError(problems)
    return _run(loaded, echo)


def run_cases(template_ref: str | None, case_files: Sequence[str], echo: Echo = print) -> int:
    """Run every case; 0 when all pass, 1 when any fails. Bad files raise TemplateError."""
    from looprun.template.loader import load_template

    template = load_template(template_ref or template_of(case_files[0]))
    return _run([(template, load_cases(Path(f), template)) for f in case_files], echo)


def _run(loaded: Sequence[tuple[Template, list[Case]]], echo: Echo) -> int:
    passed = failed = 0
    for template, cases in loaded:
        for case in cases:
            result = evaluate(case, template)
            if result.passed:
                passed += 1
                echo(f"PASS {case.name}")
                continue
            failed += 1
            echo(f"FAIL {case.name} ({case.location})")
            if result.error:
                echo(f"  error: {result.error}")
            for line in result.mismatches:
                echo(f"  {line}")
            if result.decision is not None:
                echo(f"  fired: {describe(result.decision)}")
                for src, ok in result.exit_values:
                    echo(f"  exit {'holds' if ok else 'fails'}: {src}")
    echo(f"{passed} passed, {failed} failed")
    return EXIT_ERROR if failed else EXIT_DONE
