"""``exit``: the conditions that finish the loop; done is a check, never an agent's claim."""

from __future__ import annotations

from looprun.errors import Problem
from looprun.template.build.reader import Reader
from looprun.template.expressions import Condition
from looprun.template.model import PlanSpec
from looprun.template.semantic import const_truth


def build_exit(r: Reader, plan: PlanSpec, outer: bool) -> list[Condition]:
    raw = r.get(("exit",), list)
    out = []
    for i in range(len(raw or [])):
        cond = r.condition(("exit", i), what="an exit condition")
        if cond is None:
            continue
        r.no_claims(cond, ("exit", i))
        if const_truth(cond) is False:
            r.problem(("exit", i), "this exit condition can never hold")
        out.append(cond)
    checked_tasks = plan.mode == "model" or (
        plan.mode == "static" and plan.tasks and all(t.done_when for t in plan.tasks)
    )
    if raw is not None and not raw and not checked_tasks:
        r.problem(("exit",), "no exit conditions: the loop could never finish successfully")
    elif raw is None and not checked_tasks and not r.problems:
        r.problems.append(
            Problem(
                r.doc.start,
                "missing `exit`: a loop needs exit conditions (done is a check, not a claim)",
            )
        )
    return out
