"""Test-only crash points: ``kill -9`` at an exact step, so the test suite can prove that
``looprun resume`` (or a new run) recovers from a crash there.

A point does nothing unless the environment variable ``LOOPRUN_CRASH_AT`` names it:
``LOOPRUN_CRASH_AT=commit.after-ref`` kills the process (and its process group, as a
terminal's kill of a job would) the first time the run reaches that point;
``LOOPRUN_CRASH_AT=checkpoint@3`` the third time. It is never set outside tests.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable

ENV = "LOOPRUN_CRASH_AT"
_hits: dict[str, int] = {}
_lock = threading.Lock()


def crash_point(name: str, prepare: Callable[[], object] | None = None) -> None:
    """SIGKILL this process here when ``LOOPRUN_CRASH_AT`` names ``name`` (test-only);
    ``prepare`` first leaves on disk what a kill in the middle of a step would (a torn
    line, a lock file git holds while it writes)."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    point, _, nth = spec.partition("@")
    if point != name:
        return
    with _lock:
        _hits[name] = _hits.get(name, 0) + 1
        count = _hits[name]
    if count != (int(nth) if nth.isdigit() else 1):
        return
    if prepare is not None:
        prepare()
    if os.getpgrp() == os.getpid():  # the leader of its own group: take the group along
        os.killpg(os.getpid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
