"""How hard a model client tries (the config file's ``retry:``): apart from the HTTP
client, so reading the config loads no HTTP code."""

from __future__ import annotations

import random

from looprun.data.value import valueclass


@valueclass
class RetryPolicy:
    """How hard to try. Every number is configurable (config file ``retry:``)."""

    max_attempts: int = 5
    timeout_s: float = 120.0  # per HTTP request
    backoff_base_s: float = 1.0
    backoff_max_s: float = 30.0
    retry_after_max_s: float = 120.0  # a server asking for a longer wait ends the call

    def backoff(self, attempt: int, rng: random.Random) -> float:
        """Full-range jitter over the upper half of an exponential step."""
        step = min(self.backoff_max_s, self.backoff_base_s * 2 ** (attempt - 1))
        return rng.uniform(step / 2, step)
