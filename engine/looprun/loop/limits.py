"""Hard caps, checked by the engine whatever the model does.

Each cap that trips has its own named reason. Caps are checked before every model call,
after every iteration, and before starting an iteration: an iteration the remaining
budget cannot fund (judged by what the last one cost) is not started.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field
from types import MappingProxyType
from typing import Any

from looprun.data.value import valueclass
from looprun.errors import LooprunError
from looprun.loop.outcome import Stop
from looprun.models.base import Message
from looprun.template.model import Limits

# A model call must leave at least this many tokens for its answer, or it is not made.
MIN_OUTPUT_TOKENS = 16


class CannotFund(LooprunError):
    """The remaining token budget cannot pay for the request about to be sent."""

    def __init__(self, stop: Stop):
        super().__init__(stop.reason)
        self.stop = stop


def rough_estimate(messages: Sequence[Message]) -> int:
    """Prompt tokens of ``messages`` at about four characters a token, when no calibrated
    estimator is at hand."""
    return sum(
        (len(m.content) + sum(len(c.raw_arguments or str(c.arguments)) for c in m.tool_calls)) // 4
        + 4
        for m in messages
    )


def output_cap(limits: Limits, spent: Spent, prompt_estimate: int) -> int | None:
    """The most output tokens the next model call may produce: the token budget left
    after its (estimated) prompt. None without ``max_tokens``; raises CannotFund when
    not even ``MIN_OUTPUT_TOKENS`` would be left, so the call is not made at all."""
    if limits.max_tokens is None:
        return None
    left = limits.max_tokens - spent.tokens
    room = left - prompt_estimate
    if room < MIN_OUTPUT_TOKENS:
        raise CannotFund(
            _exhausted(
                "max_tokens",
                f"max_tokens: {max(0, left)} tokens left cannot fund the next model call "
                f"(its request alone is about {prompt_estimate} tokens)",
            )
        )
    return room


@valueclass
class Spent:
    """What a run has used so far, and what its last iteration cost."""

    iterations: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    elapsed_s: float = 0.0
    per_tool: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    last_tokens: int = 0
    last_cost_usd: float = 0.0
    last_duration_s: float = 0.0


def _exhausted(code: str, reason: str) -> Stop:
    return Stop("exhausted", reason, code)


def check_spent(limits: Limits, spent: Spent) -> Stop | None:
    """A cap already reached (tokens, cost, time), whatever comes next."""
    if limits.max_tokens is not None and spent.tokens >= limits.max_tokens:
        return _exhausted(
            "max_tokens", f"max_tokens reached ({spent.tokens} of {limits.max_tokens})"
        )
    if limits.max_cost_usd is not None and spent.cost_usd >= limits.max_cost_usd:
        return _exhausted(
            "max_cost_usd",
            f"max_cost_usd reached (${spent.cost_usd:.4f} of ${limits.max_cost_usd})",
        )
    if limits.timeout_s is not None and spent.elapsed_s >= limits.timeout_s:
        return _exhausted(
            "timeout", f"timeout reached ({spent.elapsed_s:.1f}s of {limits.timeout_s:g}s)"
        )
    return None


def before_iteration(limits: Limits, spent: Spent) -> Stop | None:
    """May another iteration start? Also refuses one the remaining budget cannot fund."""
    if spent.iterations >= limits.max_iterations:
        return _exhausted("max_iterations", "max_iterations reached")
    stop = check_spent(limits, spent)
    if stop is not None:
        return stop
    if spent.iterations == 0:
        return None
    if limits.max_tokens is not None and spent.last_tokens > limits.max_tokens - spent.tokens:
        return _exhausted(
            "max_tokens",
            f"max_tokens: {limits.max_tokens - spent.tokens} tokens left cannot fund an iteration "
            f"(the last one used {spent.last_tokens})",
        )
    if (
        limits.max_cost_usd is not None
        and spent.last_cost_usd > limits.max_cost_usd - spent.cost_usd
    ):
        return _exhausted(
            "max_cost_usd",
            f"max_cost_usd: ${limits.max_cost_usd - spent.cost_usd:.4f} left cannot fund an "
            f"iteration (the last one cost ${spent.last_cost_usd:.4f})",
        )
    if limits.timeout_s is not None and spent.last_duration_s > limits.timeout_s - spent.elapsed_s:
        return _exhausted(
            "timeout",
            f"timeout: {limits.timeout_s - spent.elapsed_s:.1f}s left cannot fund an iteration "
            f"(the last one took {spent.last_duration_s:.1f}s)",
        )
    return None


def before_tool_call(limits: Limits, spent: Spent, tool: str) -> Stop | None:
    """Would one more call of ``tool`` exceed its per-tool cap?"""
    cap = limits.per_tool.get(tool)
    if cap is not None and spent.per_tool.get(tool, 0) >= cap:
        return _exhausted(f"per_tool.{tool}", f"per_tool limit for {tool} reached ({cap} calls)")
    return None


def remaining_time(limits: Limits, spent: Spent) -> float | None:
    """Seconds left on the wall clock, for a model call's timeout and tools' deadline."""
    if limits.timeout_s is None:
        return None
    return max(0.0, limits.timeout_s - spent.elapsed_s)


def budget_facts(limits: Limits, spent: Spent) -> dict[str, Any]:
    """The ``budget`` record conditions see."""

    def left(cap: float | None, used: float) -> float | None:
        return None if cap is None else max(0, cap - used)

    return {
        "iterations": spent.iterations,
        "tokens": spent.tokens,
        "cost_usd": round(spent.cost_usd, 6),
        "elapsed_s": round(spent.elapsed_s, 3),
        "per_tool": dict(spent.per_tool),
        "remaining_iterations": max(0, limits.max_iterations - spent.iterations),
        "remaining_tokens": left(limits.max_tokens, spent.tokens),
        "remaining_cost_usd": left(limits.max_cost_usd, spent.cost_usd),
        "remaining_s": left(limits.timeout_s, spent.elapsed_s),
    }


def limit_report(limits: Limits, spent: Spent, repeats: int = 0) -> list[dict[str, Any]]:
    """Each limit with its current value against its maximum, for ``observe/<n>.json``;
    ``repeats`` is the no-progress count (``progress.repeats``) ``max_repeats`` caps."""
    rows: list[dict[str, Any]] = [
        {"limit": "max_iterations", "current": spent.iterations, "max": limits.max_iterations},
        {"limit": "max_tokens", "current": spent.tokens, "max": limits.max_tokens},
        {"limit": "max_cost_usd", "current": round(spent.cost_usd, 6), "max": limits.max_cost_usd},
        {"limit": "timeout", "current": round(spent.elapsed_s, 3), "max": limits.timeout_s},
    ]
    for tool, cap in sorted(limits.per_tool.items()):
        rows.append(
            {"limit": f"per_tool.{tool}", "current": spent.per_tool.get(tool, 0), "max": cap}
        )
    if limits.max_repeats is not None:
        rows.append({"limit": "max_repeats", "current": repeats, "max": limits.max_repeats})
    return rows
