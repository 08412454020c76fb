"""Reading a run's files back: JSONL logs with a torn or garbled line skipped, JSON
files that may be missing or broken, and the journal as the run's state sees it.

Everything here reads through no-follow opens (``safefs``): a run's directory may hold
what a command planted, so nothing read is trusted to be well-formed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from looprun.system import safefs


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Events of a JSONL file; a torn or garbled line is skipped, never fatal."""
    try:
        fd = safefs.open_file(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    with open(fd, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                yield obj


def load_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``, or None when it is missing, unreadable or no object."""
    try:
        raw = safefs.read_bytes(path)
        data = json.loads(raw.decode("utf-8")) if raw is not None else None
    except (OSError, ValueError, safefs.UnsafePathError):
        return None
    return data if isinstance(data, dict) else None


# Events that describe a step; when the step is redone after a resume they are superseded.
STEP_EVENTS = frozenset(
    {
        "run_started",  # a run killed before its first state save is started again
        "plan",
        "tool_call",
        "policy_violation",
        "limit",
        "iteration",
        "task_done",
        "approval",
        "model_finish",
        "context_trimmed",
    }
)


def current_events(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The journal as the run's state sees it: step events that a later ``resumed``
    event marks superseded (written after the last saved state, so redone) are left out;
    the raw journal keeps them, append-only."""
    events = [dict(e) for e in events]
    gone: list[tuple[int, int]] = []
    for e in events:
        span = e.get("superseded") if e.get("event") == "resumed" else None
        if isinstance(span, Mapping):
            gone.append((int(span.get("from_seq", 0)), int(span.get("to_seq", -1))))
    return [
        e
        for e in events
        if not (
            e.get("event") in STEP_EVENTS
            and any(lo <= int(e.get("seq", 0)) <= hi for lo, hi in gone)
        )
    ]
