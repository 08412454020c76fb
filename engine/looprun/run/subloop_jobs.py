"""What a sub-loop is handed: its inputs, its models, its share of the budget.

Plain functions of the outer loop's state, so the act step that schedules sub-loops
(``run/subloops.py``) holds only scheduling, merging and records.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from looprun.errors import UsageError
from looprun.loop import limits as caps
from looprun.loop.core import Loop
from looprun.loop.inputs import build_inputs
from looprun.loop.plan import PlannedTask
from looprun.models.registry import model_ref_for_role
from looprun.template.expressions import shell_text
from looprun.template.model import EachTask, Limits


def budget_share(
    lim: Limits, spent: caps.Spent, held: Iterable[Mapping[str, Any]], slots: int
) -> dict[str, Any]:
    """What is left of the outer budget, less what running sub-loops hold, split by slot."""
    held = list(held)  # the shares running sub-loops hold
    held_tokens = sum(s.get("max_tokens") or 0 for s in held)
    held_cost = sum(s.get("max_cost_usd") or 0.0 for s in held)
    share: dict[str, Any] = {"timeout_s": caps.remaining_time(lim, spent)}
    if lim.max_tokens is not None:
        share["max_tokens"] = max(0, (lim.max_tokens - spent.tokens - held_tokens) // slots)
    if lim.max_cost_usd is not None:
        left = lim.max_cost_usd - spent.cost_usd - held_cost
        share["max_cost_usd"] = max(0.0, left / slots)
    return share


def sub_inputs(loop: Loop, each: EachTask, task: PlannedTask) -> dict[str, Any]:
    """The sub-template's inputs: ``each_task.with`` rendered for ``task``."""
    ctx = {
        "task": {
            "id": task.id,
            "goal": task.goal,
            "paths": list(task.paths),
            "depends_on": list(task.depends_on),
        },
        "intent": loop.inputs.get("intent", ""),
        "inputs": loop.inputs,
        "run": loop.run_info.facts(),
    }
    sub = each.template
    rendered = {}
    for k, text in each.with_.items():
        spec = sub.inputs.get(k)
        if spec is not None and spec.type == "command":
            # This value becomes shell code in the sub-loop: everything substituted
            # into it (task goals, intent) is quoted; only command inputs stay code.
            text = shell_text(text)
        rendered[k] = text.render(ctx)
    # what the run's stack read from its base (the test runner): the sub-template composes
    # the same pack, so it gets the same values unless `with` names them
    inherited = loop.invocation.get("stack_inputs") or {}
    for k, value in inherited.items():
        if k in sub.inputs and k not in rendered:
            rendered[k] = str(value)
    intent = rendered.pop("intent", None) or task.goal
    return build_inputs(sub.inputs, intent, rendered)


def model_refs(
    invocation: Mapping[str, Any], config: Any, each: EachTask, outer_act: str
) -> tuple[dict[str, str], dict[str, str | None]]:
    """The sub-loop's models per role: command line > environment > config file >
    the sub-template's ``models:``; a role nothing names uses the outer act model."""
    raw = invocation.get("cli_models")
    cli = {k: v for k, v in raw.items() if v} if isinstance(raw, dict) else {}
    refs: dict[str, str] = {}
    for role in ("act", "plan"):
        try:
            ref = model_ref_for_role(
                role,
                cli_model=cli.get("act"),
                cli_role_models={"plan": cli.get("plan")},
                config=config,
                template_models=each.template.models,
            )
        except UsageError:
            ref = outer_act if role == "act" else refs["act"]
        refs[role] = _absolute_script(ref)
    return refs, cli


def invocation_rewritten(loop: Loop) -> str:
    """A note when ``run.json`` no longer holds what this run was invoked with, else "".
    The file is only a record: a command may rewrite it while the run goes on (without
    the OS sandbox, or under Landlock), and what it says then decides nothing."""
    inv, path = loop.invocation, Path(loop.run_info.dir) / "run.json"
    if not inv:
        return ""
    written = json.loads(loop.ports.journal.invocation_text(inv))  # as run.json holds it
    if not _rewritten(path, written):
        return ""
    return (
        f"{path}: run.json was changed while the "
        "run went on (by a command?); sub-loops keep the invocation the run started "
        "with, and a resume refuses the changed file"
    )


def _rewritten(path: Path, invocation: Any) -> bool:
    """True when ``path`` no longer holds ``invocation`` (as JSON reads it back)."""
    try:
        on_disk = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return True
    return bool(on_disk != json.loads(json.dumps(invocation, default=str)))


def limit_key(code: str) -> str:
    return "timeout_s" if code == "timeout" else code


def _absolute_script(ref: str) -> str:
    if ref.startswith("script:"):
        return "script:" + str(Path(ref.removeprefix("script:")).expanduser().resolve())
    return ref
