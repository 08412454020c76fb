"""Usage a run's record holds beyond its last saved state: plain data, shared by the
journal that reads it back and the loop's port that asks for it."""

from __future__ import annotations

from looprun.data.value import valueclass


@valueclass
class UnsavedUsage:
    """What model calls recorded after the last saved state cost, and how long they ran:
    a killed iteration was paid for, and a resume charges it."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0
