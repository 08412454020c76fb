"""How long a remote sub-loop may go without pushing a step before the executor gives
it to a new execution (``LOOPRUN_RAY_WATCHDOG_S`` overrides it).

A worker pushes after every completed step, so the silence of a healthy one is bounded
by the longest step its sub-template allows: the act turn (an agent CLI's ``timeout``,
or ``max_steps`` model calls and commands) and every check's ``timeout``, never more
than the sub-loop's own wall-clock share. A frozen or cut-off node stays silent past
that; the lease fence makes giving its sub-loop away at once safe.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from looprun.errors import LooprunError
from looprun.template.loader import load_template
from looprun.template.model import Template

MODEL_CALL_S = 600.0  # one model call with its retries (the default retry budget)
PUSH_S = 60.0  # the push after a step, and slack for a loaded node
NESTED_STEP_S = 6 * 3600.0  # a step that runs sub-loops of its own, with no time limit


def step_bound(template: Template) -> float:
    """The longest one step of ``template`` may take by its own timeouts."""
    if template.each_task is not None:
        return template.limits.timeout_s or NESTED_STEP_S
    act = template.act
    if act is None:
        act_s = 0.0
    elif act.agent is not None:
        act_s = act.agent.timeout_s
    else:
        act_s = act.max_steps * (MODEL_CALL_S + act.constraints.command_timeout_s)
    checks = sum(o.timeout_s for o in template.observe.values())
    return act_s + checks + PUSH_S


@functools.lru_cache(maxsize=64)
def _template_bound(ref: str) -> float | None:
    try:
        return step_bound(load_template(ref))
    except (LooprunError, OSError):
        return None  # the worker will say what is wrong with it


def default_watchdog(template: str, limits: Mapping[str, Any]) -> float:
    """The watchdog of one sub-loop: its template's step bound, capped by its time share."""
    bound = _template_bound(template) or NESTED_STEP_S
    share = limits.get("timeout_s")
    if isinstance(share, int | float) and share > 0:
        bound = min(bound, float(share) + PUSH_S)
    return bound
