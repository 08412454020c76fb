"""``each_task``: the sub-loop template run for each planned task, and the inputs
it is given.
"""

from __future__ import annotations

from pathlib import Path

from looprun.data.freeze import freeze
from looprun.errors import TemplateError
from looprun.template.build.reader import Reader
from looprun.template.compose import missing_ref_message, read_remote, resolve_source
from looprun.template.expressions import Text
from looprun.template.model import EachTask, PlanSpec, Template
from looprun.template.semantic import WITH_NAMES
from looprun.template.sharing.refs import RefError, source_of
from looprun.template.suggest import did_you_mean
from looprun.template.yamlpos import JsonPath


def build_each_task(r: Reader, plan: PlanSpec) -> EachTask | None:
    raw = r.get(("each_task",), dict)
    if raw is None or not isinstance(raw.get("uses"), str):
        return None
    path: JsonPath = ("each_task",)
    if plan.mode == "none":
        r.problem(path, "each_task needs tasks: set plan.mode to static or model", key=True)
    isolation = raw.get("isolation", "worktree")
    parallel = r.get((*path, "parallel"), int, 1)
    if isolation == "none" and parallel > 1:
        r.problem((*path, "parallel"), "parallel sub-loops need isolation: worktree")
    with_: dict[str, Text] = {}
    for key in (raw.get("with") or {}) if isinstance(raw.get("with"), dict) else {}:
        text = r.text((*path, "with", key), WITH_NAMES, "each_task.with")
        if text is not None:
            with_[key] = text
    uses = raw["uses"]
    sub = _load_sub(r, uses, (*path, "uses"))
    if sub is None:
        return None
    known = set(sub.inputs) | {"intent"}
    for key in with_:
        if key not in known:
            r.problem(
                (*path, "with", key),
                f"template '{sub.name}' has no input '{key}'{did_you_mean(key, known)}",
                key=True,
            )
    for name, spec in sub.inputs.items():
        if spec.required and name not in with_:
            r.problem(
                (*path, "with"),
                f"template '{sub.name}' requires input '{name}'; give it in each_task.with",
            )
    return EachTask(
        uses=uses,
        template=sub,
        with_=freeze(with_),
        isolation=isolation if isolation in ("worktree", "none") else "worktree",
        parallel=parallel,
        location=r.doc.key_at(path),
    )


def _load_sub(r: Reader, ref: str, path: JsonPath) -> Template | None:
    if r.sub_loader is None:
        return None
    loc = r.at(path)
    try:
        target = resolve_source(ref, source_of(loc.file), loc)
        if target is not None:
            read_remote(target)  # a reference the lock does not allow is located here
    except RefError as exc:
        r.problem(path, str(exc))
        return None
    if target is None or (isinstance(target, Path) and target.is_dir()):
        r.problem(path, missing_ref_message(ref))
        return None
    try:
        return r.sub_loader(target, loc)
    except TemplateError as exc:
        r.problems.extend(exc.problems)
        return None
