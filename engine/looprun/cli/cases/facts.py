"""One iteration's expression context built from a case, as the engine builds it: every
observer a clean pass unless the case says otherwise, then the case's facts."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from looprun.cli.cases.load import Case
from looprun.data.freeze import thaw
from looprun.loop.baseline import COMPARISONS, baseline_facts, no_comparisons, slim
from looprun.loop.limits import Spent, budget_facts
from looprun.loop.plan import static_tasks
from looprun.observe.base import Observation
from looprun.observe.declared_facts import preset_facts
from looprun.observe.registry import get_parser
from looprun.template.agents import EMPTY_FACTS
from looprun.template.expressions import Condition, compile_condition
from looprun.template.model import Template

_EMPTY_BY_TYPE: dict[str, Any] = {
    "string": "",
    "command": "",
    "integer": 0,
    "number": 0,
    "boolean": False,
    "list": [],
}


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
        named = preset_facts(spec.parser, thaw(spec.options))
        if spec.parser == "json" and named:  # the facts its `facts` option names
            empty = {**named, **empty}
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
            done_when = compile_condition(str(raw["done_when"]), case.location)
    return facts, done_when


def facts_for(case: Case, template: Template) -> tuple[dict[str, Any], Condition | None]:
    """The expression context of one iteration, as the engine builds it, from a case."""
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
