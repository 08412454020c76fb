"""How long this process has been running, so a run's timing can count the interpreter's
start-up and the imports that came before any of looprun's own code."""

from __future__ import annotations

import os
import time


def process_age() -> float | None:
    """Seconds since this process started, from ``/proc`` (Linux); None elsewhere or when
    it cannot be read. Good to the kernel's clock tick (10 ms at 100 Hz)."""
    try:
        with open("/proc/self/stat", "rb") as fh:
            stat = fh.read().decode("ascii", "replace")
        # the command name (field 2) may hold spaces and parentheses: count from its end
        fields = stat[stat.rindex(")") + 2 :].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started)
    except (OSError, ValueError, IndexError, AttributeError):
        return None
