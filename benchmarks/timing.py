"""What the micro-benchmarks share: the median wall time of a step, in milliseconds."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_ms(step: Callable[[], object], runs: int) -> float:
    """The median of ``runs`` timed calls of ``step``, in milliseconds."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000
