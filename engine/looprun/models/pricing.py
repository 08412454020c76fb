"""Prices per model, in US dollars per million tokens, the cost of a reply's usage, and
each model's own output maximum.

A small built-in table of public list prices; the config file's ``prices:`` adds models or
overrides these. A model without a price costs 0 and is flagged as unknown, so the engine
can warn that ``limits.max_cost_usd`` cannot be enforced for it.

Beside it, the most output tokens each model may be asked for: a request never asks for
more (whatever budget is left), since providers refuse or clamp such requests. The config
file's ``output_limits:`` adds models (a local server's) or overrides these.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from looprun.data.value import valueclass
from looprun.models.base import Usage


@valueclass
class Price:
    """US dollars per million tokens. ``cached_input`` defaults to ``input`` and
    ``cache_write`` (Anthropic's cache creation) to 1.25 x ``input``."""

    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None

    def cost(self, usage: Usage) -> float:
        cached = min(usage.cached_tokens, usage.prompt_tokens)
        writes = min(usage.cache_write_tokens, usage.prompt_tokens - cached)
        plain = usage.prompt_tokens - cached - writes
        cached_rate = self.input if self.cached_input is None else self.cached_input
        write_rate = self.input * 1.25 if self.cache_write is None else self.cache_write
        total = (
            plain * self.input
            + cached * cached_rate
            + writes * write_rate
            + usage.completion_tokens * self.output
        )
        return total / 1_000_000


def _p(inp: float, out: float, cached: float | None = None, write: float | None = None) -> Price:
    return Price(inp, out, cached, write)


# Public list prices (standard tier, USD per million tokens) at the time of writing.
BUILTIN_PRICES: Mapping[str, Price] = MappingProxyType(
    {
        # OpenAI
        "gpt-5": _p(1.25, 10.0, 0.125),
        "gpt-5-mini": _p(0.25, 2.0, 0.025),
        "gpt-5-nano": _p(0.05, 0.40, 0.005),
        "gpt-4.1": _p(2.0, 8.0, 0.50),
        "gpt-4.1-mini": _p(0.40, 1.60, 0.10),
        "gpt-4.1-nano": _p(0.10, 0.40, 0.025),
        "gpt-4o": _p(2.50, 10.0, 1.25),
        "gpt-4o-mini": _p(0.15, 0.60, 0.075),
        "o3": _p(2.0, 8.0, 0.50),
        "o4-mini": _p(1.10, 4.40, 0.275),
        # Anthropic (cache reads at 0.1 x input, 5-minute cache writes at 1.25 x input)
        "claude-opus-4-5": _p(5.0, 25.0, 0.50, 6.25),
        "claude-opus-4-1": _p(15.0, 75.0, 1.50, 18.75),
        "claude-opus-4": _p(15.0, 75.0, 1.50, 18.75),
        "claude-sonnet-4-5": _p(3.0, 15.0, 0.30, 3.75),
        "claude-sonnet-4": _p(3.0, 15.0, 0.30, 3.75),
        "claude-3-7-sonnet": _p(3.0, 15.0, 0.30, 3.75),
        "claude-haiku-4-5": _p(1.0, 5.0, 0.10, 1.25),
        "claude-3-5-haiku": _p(0.80, 4.0, 0.08, 1.0),
        # Google Gemini API (prompts up to 200k tokens; cached input at 0.1 x input)
        "gemini-2.5-pro": _p(1.25, 10.0, 0.125),
        "gemini-2.5-flash": _p(0.30, 2.50, 0.03),
        "gemini-2.5-flash-lite": _p(0.10, 0.40, 0.01),
    }
)

# The most output tokens one request may ask of each model (the providers' model pages).
BUILTIN_OUTPUT_LIMITS: Mapping[str, int] = MappingProxyType(
    {
        "gpt-5": 128_000,
        "gpt-5-mini": 128_000,
        "gpt-5-nano": 128_000,
        "gpt-4.1": 32_768,
        "gpt-4.1-mini": 32_768,
        "gpt-4.1-nano": 32_768,
        "gpt-4o": 16_384,
        "gpt-4o-mini": 16_384,
        "o3": 100_000,
        "o4-mini": 100_000,
        "claude-opus-4-5": 64_000,
        "claude-opus-4-1": 32_000,
        "claude-opus-4": 32_000,
        "claude-sonnet-4-5": 64_000,
        "claude-sonnet-4": 64_000,
        "claude-3-7-sonnet": 64_000,
        "claude-haiku-4-5": 64_000,
        "claude-3-5-haiku": 8_192,
        "gemini-2.5-pro": 65_536,
        "gemini-2.5-flash": 65_536,
        "gemini-2.5-flash-lite": 65_536,
    }
)

# A dated snapshot ("gpt-4o-mini-2024-07-18", "claude-haiku-4-5-20251001") or "-latest".
_SNAPSHOT = re.compile(r"^-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


def _lookup(table: Mapping[str, Any], model: str) -> Any:
    """Exact name; else without a router prefix (``openai/gpt-4o``); else the base name of
    a dated snapshot. Never a looser match: a wrong entry is worse than none."""
    candidates = [model]
    if "/" in model:
        candidates.append(model.rsplit("/", 1)[1])
    for name in candidates:
        if name in table:
            return table[name]
        for known in sorted(table, key=len, reverse=True):
            if name.startswith(known) and _SNAPSHOT.match(name[len(known) :]):
                return table[known]
    return None


class PriceTable:
    """Built-in prices and output maxima overlaid with the user's; looks names up the way
    providers spell them."""

    def __init__(
        self,
        extra: Mapping[str, Price] | None = None,
        *,
        builtin: bool = True,
        output_limits: Mapping[str, int] | None = None,
    ):
        table = dict(BUILTIN_PRICES) if builtin else {}
        table.update(extra or {})
        self._table = MappingProxyType(table)
        limits = dict(BUILTIN_OUTPUT_LIMITS) if builtin else {}
        limits.update(output_limits or {})
        self._limits = MappingProxyType(limits)

    @property
    def models(self) -> Mapping[str, Price]:
        return self._table

    def lookup(self, model: str) -> Price | None:
        """The model's price, or None when unknown."""
        price: Price | None = _lookup(self._table, model)
        return price

    def max_output(self, model: str) -> int | None:
        """The most output tokens one request may ask of ``model``; None when unknown."""
        limit: int | None = _lookup(self._limits, model)
        return limit

    def cost(self, model: str, usage: Usage) -> tuple[float, bool]:
        """(cost in USD, whether the price was known)."""
        price = self.lookup(model)
        if price is None:
            return 0.0, False
        return price.cost(usage), True
