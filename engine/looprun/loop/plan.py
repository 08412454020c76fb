"""Planning: turn the intent into tasks, each with a machine-checkable done state.

Modes: ``none`` (one task, the intent), ``static`` (the template's tasks), ``model`` (the
plan-role model writes tasks as JSON, checked against a schema; each ``done_when`` must
compile and use only declared names; a malformed plan gets one retry with the exact
error as feedback, then planning fails with that error as the reason).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from looprun.data.value import valueclass
from looprun.errors import Location, LooprunError, TemplateError
from looprun.models.base import Message, Model, Reply
from looprun.observe.base import COMMON_FACTS
from looprun.observe.registry import parser_facts
from looprun.template.expressions import Condition, Text, compile_condition
from looprun.template.model import ENGINE_NAMES, PlanSpec, Template

TASK_ID = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"

PLAN_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["tasks"],
    "additionalProperties": False,
    "properties": {
        "tasks": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["id", "goal"],
                "additionalProperties": False,
                "properties": {
                    "id": {"type": "string", "pattern": TASK_ID},
                    "goal": {"type": "string", "minLength": 1},
                    "done_when": {"type": "string", "minLength": 1},
                    "paths": {"type": "array", "items": {"type": "string"}},
                    "depends_on": {"type": "array", "items": {"type": "string"}},
                },
            },
        }
    },
}

DEFAULT_PLAN_PROMPT = """Break the following intent into small tasks, each with a checkable
done state.
Intent: {intent}
{remaining}Answer with JSON only, exactly this shape:
{{"tasks": [{{"id": "short-id", "goal": "what to do", "done_when": "optional condition",
  "paths": ["optional globs"], "depends_on": ["ids of tasks this needs"]}}]}}
At most {max_tasks} tasks. A done_when may use only these names: {names}."""


class PlanError(LooprunError):
    """The planner's answer could not be used, even after one retry."""


@valueclass
class PlannedTask:
    """A task as the loop works on it: goal rendered, from the template or the planner."""

    id: str
    goal: str
    done_when: Condition | None = None
    paths: tuple[str, ...] = ()
    depends_on: tuple[str, ...] = ()
    protect: tuple[str, ...] = ()  # read-only globs, rendered
    protect_doctests: bool = False
    protect_allow_new: tuple[str, ...] = ()  # protected globs new files may still take

    def to_dict(self) -> dict[str, Any]:
        out = {
            "id": self.id,
            "goal": self.goal,
            "done_when": self.done_when.source if self.done_when else None,
            "paths": list(self.paths),
            "depends_on": list(self.depends_on),
        }
        if self.protect or self.protect_doctests:
            out["protect"] = {"paths": list(self.protect), "doctests": self.protect_doctests}
            if self.protect_allow_new:
                out["protect"]["allow_new"] = list(self.protect_allow_new)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "state.json") -> PlannedTask:
        dw = data.get("done_when")
        return cls(
            id=str(data["id"]),
            goal=str(data["goal"]),
            done_when=compile_condition(dw, Location(where)) if dw else None,
            paths=tuple(data.get("paths") or ()),
            depends_on=tuple(data.get("depends_on") or ()),
            protect=tuple((data.get("protect") or {}).get("paths") or ()),
            protect_doctests=bool((data.get("protect") or {}).get("doctests")),
            protect_allow_new=tuple((data.get("protect") or {}).get("allow_new") or ()),
        )


def declared_names(template: Template) -> frozenset[str]:
    return frozenset(template.observe) | ENGINE_NAMES


# a glob that is a whole list input: ``"{{ inputs.test_files }}"`` or ``"!{{ inputs.X }}"``
_LIST_INPUT = re.compile(r"^(!?)\{\{\s*inputs\.([A-Za-z_]\w*)\s*\}\}$")


def rendered_globs(texts: Iterable[Text], context: Mapping[str, Any]) -> tuple[str, ...]:
    """Protect globs rendered with the run's intent and inputs; empty ones dropped. A
    glob written as a whole list input stands for its items (each negated with ``!``):
    a stack's pack says which files are tests or configuration, the template says what
    happens to them."""
    out: list[str] = []
    inputs = context.get("inputs")
    for t in texts:
        whole = _LIST_INPUT.match(t.source.strip())
        value = inputs.get(whole.group(2)) if whole and isinstance(inputs, Mapping) else None
        if whole and isinstance(value, list | tuple):
            out += [whole.group(1) + g for item in value if (g := str(item).strip())]
        elif g := t.render(context).strip():
            out.append(g)
    return tuple(out)


def static_tasks(template: Template, context: Mapping[str, Any]) -> list[PlannedTask]:
    """Tasks of mode ``none`` and ``static``, goals rendered with the run's inputs."""
    plan: PlanSpec = template.plan
    if plan.mode == "none" or not plan.tasks:
        return [PlannedTask("main", str(context.get("intent") or template.description or "main"))]
    out = []
    for spec in plan.tasks:
        goal = spec.goal.render({**context, "task": {"id": spec.id, "paths": list(spec.paths)}})
        protect = rendered_globs(spec.protect.paths, context)
        allow_new = rendered_globs(spec.protect.allow_new, context)
        out.append(
            PlannedTask(
                spec.id,
                goal.strip(),
                spec.done_when,
                spec.paths,
                spec.depends_on,
                protect,
                spec.protect.doctests,
                allow_new,
            )
        )
    return out


def _extract_json(text: str) -> Any:
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.DOTALL)
    body = fenced.group(1) if fenced else text
    start = min((i for i in (body.find("{"), body.find("[")) if i >= 0), default=-1)
    if start < 0:
        raise ValueError("the answer contains no JSON object")
    try:
        data, _ = json.JSONDecoder().raw_decode(body[start:])
    except json.JSONDecodeError as exc:
        raise ValueError(f"the answer is not valid JSON: {exc}") from None
    if isinstance(data, list):
        data = {"tasks": data}
    return data


def _order(tasks: list[PlannedTask], done: Iterable[str]) -> list[PlannedTask]:
    """Dependency order (stable); unknown ids and cycles are plan errors."""
    known = {t.id for t in tasks} | set(done)
    for t in tasks:
        missing = [d for d in t.depends_on if d not in known]
        if missing:
            raise ValueError(f"task {t.id!r} depends on unknown task(s) {missing}")
    placed: set[str] = set(done)
    ordered: list[PlannedTask] = []
    pending = list(tasks)
    while pending:
        ready = [t for t in pending if set(t.depends_on) <= placed]
        if not ready:
            raise ValueError(
                "tasks depend on each other in a cycle: " + ", ".join(t.id for t in pending)
            )
        for t in ready:
            ordered.append(t)
            placed.add(t.id)
            pending.remove(t)
    return ordered


def parse_plan(text: str, template: Template, done: Iterable[str] = ()) -> list[PlannedTask]:
    """Check a planner's answer; raises ValueError with the exact problem."""
    import jsonschema  # slow to import; only model-planned runs pay for it

    data = _extract_json(text)
    validator = jsonschema.Draft202012Validator(PLAN_SCHEMA)
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        where = "/".join(str(p) for p in e.absolute_path) or "(top level)"
        raise ValueError(f"plan does not match the schema at {where}: {e.message}")
    raw = data["tasks"]
    if len(raw) > template.plan.max_tasks:
        raise ValueError(f"plan has {len(raw)} tasks; at most {template.plan.max_tasks} allowed")
    names = declared_names(template)
    tasks, seen = [], set(done)
    for n, item in enumerate(raw):
        if item["id"] in seen:
            raise ValueError(f"task id {item['id']!r} is used twice")
        seen.add(item["id"])
        cond = None
        if item.get("done_when"):
            where = Location(f"plan task {item['id']}")
            try:
                cond = compile_condition(item["done_when"], where, untrusted=True)
            except TemplateError as exc:
                raise ValueError(f"tasks/{n}/done_when: {exc.problems[0].message}") from None
            unknown = sorted(cond.use.names - names)
            if unknown:
                raise ValueError(
                    f"tasks/{n}/done_when uses undeclared name(s) {unknown}; "
                    f"declared: {sorted(names)}"
                )
            problem = _unknown_fact(cond, template)
            if problem:
                raise ValueError(f"tasks/{n}/done_when: {problem}")
        tasks.append(
            PlannedTask(
                item["id"],
                item["goal"].strip(),
                cond,
                tuple(item.get("paths") or ()),
                tuple(item.get("depends_on") or ()),
            )
        )
    return _order(tasks, done)


def _unknown_fact(cond: Condition, template: Template) -> str | None:
    """A fact or input the condition reads that will not exist, as the loader checks it."""
    for name, attr in sorted(cond.use.attributes):
        if name == "inputs" and attr not in template.inputs and attr != "intent":
            return f"no input named {attr!r}; inputs: {sorted({*template.inputs, 'intent'})}"
        spec = template.observe.get(name)
        facts = parser_facts(spec.parser) if spec is not None else None
        if spec is not None and facts is not None and attr not in facts | COMMON_FACTS:
            return (
                f"observer {name!r} (parser {spec.parser}) has no fact {attr!r}; "
                f"its facts: {sorted(facts | COMMON_FACTS)}"
            )
    return None


def model_plan(
    model: Model,
    template: Template,
    context: Mapping[str, Any],
    *,
    remaining: Sequence[PlannedTask] = (),
    done: Iterable[str] = (),
    feedback: str = "",
    timeout_s: float | None = None,
    on_reply: Any = None,
    output_cap: Any = None,
) -> list[PlannedTask]:
    """Ask the plan-role model for tasks; one retry with the exact error, then PlanError."""
    done = list(done)
    rem = ""
    if remaining:
        rem = (
            "Tasks still open (replan these):\n"
            + "\n".join(f"- {t.id}: {t.goal}" for t in remaining)
            + "\n"
        )
    if done:
        rem += f"Already done: {', '.join(done)}\n"
    if template.plan.prompt is not None:  # the template's prompt sees the replan feedback
        prompt = template.plan.prompt.render({"feedback": feedback, **context}).strip()
        if rem:
            prompt += "\n\n" + rem
    else:
        if feedback:
            rem += f"What went wrong:\n{feedback}\n"
        prompt = DEFAULT_PLAN_PROMPT.format(
            intent=context.get("intent", ""),
            remaining=rem,
            max_tasks=template.plan.max_tasks,
            names=", ".join(sorted(declared_names(template))),
        )
    messages = [Message("user", prompt)]
    problem = ""
    for _attempt in range(2):
        reply: Reply = model.complete(
            messages,
            [],
            role="plan",
            timeout_s=timeout_s,
            max_output_tokens=output_cap(messages) if output_cap is not None else None,
        )
        if on_reply is not None:
            on_reply(messages, reply)
        try:
            return parse_plan(reply.message.content, template, done)
        except ValueError as exc:
            problem = str(exc)
        messages = [
            *messages,
            reply.message,
            Message(
                "user",
                f"That plan cannot be used: {problem}\n"
                "Answer again with JSON only, in the shape asked for.",
            ),
        ]
    raise PlanError(f"the planner's answer was malformed twice: {problem}")
