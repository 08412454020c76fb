"""``plan``: its mode and, for a static plan, the tasks with their goals, checks and
dependencies.
"""

from __future__ import annotations

from typing import Any

from looprun.errors import Location
from looprun.template.build.reader import Reader
from looprun.template.model import PlanSpec, TaskSpec
from looprun.template.semantic import GOAL_NAMES, PLAN_PROMPT_NAMES, dependency_problems
from looprun.template.yamlpos import JsonPath


def build_plan(r: Reader) -> PlanSpec:
    raw = r.get(("plan",), dict) or {}
    tasks_raw = raw.get("tasks") if isinstance(raw.get("tasks"), list) else None
    mode = raw.get("mode") or ("static" if tasks_raw else "none")
    if mode not in ("none", "static", "model"):
        mode = "none"
    if mode == "static" and not tasks_raw and "tasks" not in raw:
        r.problem(("plan", "mode"), "plan.mode static needs a list of tasks")
    if mode != "static" and "tasks" in raw:
        r.problem(
            ("plan", "tasks"),
            f"tasks are only listed with plan.mode static (this plan's mode is {mode})",
            key=True,
        )
    if mode != "model":
        if "prompt" in raw:
            r.problem(
                ("plan", "prompt"), "a plan prompt is only used with plan.mode model", key=True
            )
        if "max_tasks" in raw:
            r.problem(("plan", "max_tasks"), "max_tasks only applies to plan.mode model", key=True)
    tasks = _tasks(r, tasks_raw or []) if mode == "static" else []
    prompt = None
    if mode == "model":
        prompt = r.text(("plan", "prompt"), PLAN_PROMPT_NAMES, "the plan prompt")
    return PlanSpec(
        mode=mode,
        tasks=tuple(tasks),
        prompt=prompt,
        max_tasks=r.get(("plan", "max_tasks"), int, PlanSpec.max_tasks),
    )


def _tasks(r: Reader, raw: list[Any]) -> list[TaskSpec]:
    out: list[TaskSpec] = []
    seen: dict[str, Location] = {}
    for i, task in enumerate(raw):
        path: JsonPath = ("plan", "tasks", i)
        if not isinstance(task, dict) or not isinstance(task.get("id"), str):
            continue
        tid = task["id"]
        if tid in seen:
            r.problem((*path, "id"), f"duplicate task id '{tid}' (first at line {seen[tid].line})")
            continue
        seen[tid] = r.at((*path, "id"))
        goal = r.text((*path, "goal"), GOAL_NAMES, "a task goal")
        done = r.condition((*path, "done_when")) if "done_when" in task else None
        r.no_claims(done, (*path, "done_when"))
        deps = [d for d in task.get("depends_on") or [] if isinstance(d, str)]
        paths_ = [p for p in task.get("paths") or [] if isinstance(p, str)]
        protect = r.protect((*path, "protect"))
        if goal is not None:
            out.append(TaskSpec(tid, goal, done, tuple(paths_), tuple(deps), r.at(path), protect))
    for dpath, message in dependency_problems(raw, out, seen):
        r.problem(dpath, message)
    return out
