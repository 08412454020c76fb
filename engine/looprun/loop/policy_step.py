"""The policy step: the template's constraints checked on the real diff after each act.

A tool call the policy refused is already in the turn; this step finds what got past the
tools (a command that wrote a protected file, an agent CLI's own edits): forbidden
patterns, protected paths and doctests, a repository whose refs were moved, and the
paths that need a person's approval. The result is the ``policy`` facts rules read.
"""

from __future__ import annotations

from typing import Any

from looprun.loop.act.step import Turn
from looprun.loop.core import Loop
from looprun.loop.plan import PlannedTask
from looprun.loop.ports import ViolationLike


def policy(loop: Loop, turn: Turn, task: PlannedTask) -> dict[str, Any]:
    """The ``policy`` facts of one iteration; every violation found here is journaled."""
    ports, st = loop.ports, loop.state
    ws, guard = ports.workspace, ports.guard
    diff = ws.diff(st.base)
    diff_items = [
        {"rule": v.rule, "message": v.message, "tool": v.tool, "detail": v.detail}
        for v in [
            *guard.check_diff(diff),
            *guard.check_patterns(diff, loop.protect.scoped),
            *protected(loop, task),
        ]
    ]
    moved = ws.repository_changed()
    if moved:
        diff_items.append(
            {"rule": "repository.changed", "message": moved, "tool": "diff", "detail": ".git"}
        )
    for item in diff_items:
        ports.journal.event("policy_violation", iteration=st.iterations + 1, **item)
    items = turn.refusals + diff_items
    lines = sum(
        1 for ln in diff.split("\n") if ln[:1] in "+-" and not ln.startswith(("+++", "---"))
    )
    return {
        "violations": len(items),
        "diff_violations": len(diff_items),
        "summary": "\n".join(f"- {i['tool']}: {i['message']}" for i in items),
        "items": items,
        "diff_lines": lines,
        "pending_approvals": guard.needs_approval(ws.changed_files(st.base)),
    }


def protected(loop: Loop, task: PlannedTask) -> list[ViolationLike]:
    """Changes to what the task (since it started) or the run (since its base) protects."""
    st, ws, found = loop.state, loop.ports.workspace, []
    run = loop.protect
    task_rules = (task.protect, task.protect_doctests, task.protect_allow_new)
    run_rules = (run.paths, run.doctests, run.allow_new)
    for since, (globs, doctests, new), scope in (
        (st.task_start, task_rules, f"in task {task.id}"),
        (st.base, run_rules, "in this run"),
    ):
        if since and (globs or doctests):
            changes = ws.file_changes(since, contents=doctests)
            found.extend(loop.ports.guard.check_protected(changes, globs, doctests, scope, new))
    return found
