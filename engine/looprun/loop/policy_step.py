"""The policy step: the template's constraints checked on the real diff after each act.

A tool call the policy refused is already in the turn; this step finds what got past the
tools (a command that wrote a protected file, an agent CLI's own edits): forbidden
patterns, protected paths and doctests, a repository whose refs were moved, and the
paths that need a person's approval. The result is the ``policy`` facts rules read.
"""

from __future__ import annotations

from typing import Any

from looprun.data.value import valueclass
from looprun.loop.core import Loop
from looprun.loop.plan import PlannedTask
from looprun.loop.ports import ViolationLike


@valueclass
class PolicyFindings:
    """What the policy found in one iteration: the act step's refused calls and what the
    real diff breaks (``diff_violations`` of ``items``), and paths awaiting approval."""

    items: tuple[dict[str, Any], ...] = ()
    diff_violations: int = 0
    diff_lines: int = 0
    pending_approvals: tuple[str, ...] = ()

    @property
    def summary(self) -> str:
        return "\n".join(f"- {i['tool']}: {i['message']}" for i in self.items)

    def facts(self) -> dict[str, Any]:
        """What rules read as ``policy`` (and what the observation record keeps)."""
        return {
            "violations": len(self.items),
            "diff_violations": self.diff_violations,
            "summary": self.summary,
            "items": list(self.items),
            "diff_lines": self.diff_lines,
            "pending_approvals": list(self.pending_approvals),
        }


NOTHING_FOUND = PolicyFindings()


def policy(loop: Loop, refusals: list[dict[str, Any]], task: PlannedTask) -> PolicyFindings:
    """The policy's findings in one iteration; every violation in the diff is journaled."""
    ports, st = loop.ports, loop.state
    ws, guard = ports.workspace, ports.guard
    found, lines = guard.review_diff(ws.diff_parts(st.base), loop.protect.scoped)
    diff_items = [
        {"rule": v.rule, "message": v.message, "tool": v.tool, "detail": v.detail}
        for v in [*found, *protected(loop, task)]
    ]
    for path, message in ws.repository_changed():
        diff_items.append(
            {"rule": "repository.changed", "message": message, "tool": "diff", "detail": path}
        )
    for item in diff_items:
        ports.journal.event("policy_violation", iteration=st.iterations + 1, **item)
    return PolicyFindings(
        items=(*refusals, *diff_items),
        diff_violations=len(diff_items),
        diff_lines=lines,
        pending_approvals=tuple(guard.needs_approval(ws.changed_files(st.base))),
    )


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
