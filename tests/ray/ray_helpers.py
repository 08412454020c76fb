"""Helpers of the Ray tests."""

from __future__ import annotations

import subprocess


def busy_workers() -> list[str]:
    """Ray workers running a sub-loop right now (Ray names a busy worker after its task)."""
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "ray::execute" in line]
