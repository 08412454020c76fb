"""Reading a run's files back: JSONL logs with a torn or garbled line skipped, JSON
files that may be missing or broken, the journal as the run's state sees it, and the
run's saved state (:func:`load_state`).

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


# The journal record that holds a saved loop state (``{"event": "state", "state": {...}}``):
# the journal's fsync is the one durable point of a step, state.json an unsynced copy.
STATE_EVENT = "state"
_TAIL_CHUNK = 64 * 1024


def last_state_record(path: Path) -> dict[str, Any] | None:
    """The state in the last complete ``state`` record of journal ``path``, or None.

    Read from the end in growing chunks: the last save is usually within the last few
    events, so a long run's journal is not parsed whole."""
    try:
        fd = safefs.open_file(path, os.O_RDONLY)
    except (FileNotFoundError, safefs.UnsafePathError):
        return None
    with os.fdopen(fd, "rb") as fh:
        end = os.fstat(fd).st_size
        start = end
        while start > 0:
            start = max(0, start - _TAIL_CHUNK)
            fh.seek(start)
            data = fh.read(end - start)
            lines = data.split(b"\n")
            if start > 0:
                lines = lines[1:]  # may begin mid-line; read again with the next chunk
            for line in reversed(lines):
                if b'"state"' not in line:
                    continue
                state = _state_of(line)
                if state is not None:
                    return state
            if start > 0:
                end = start + len(data.split(b"\n", 1)[0])  # the cut line, next time whole
    return None


def _state_of(line: bytes) -> dict[str, Any] | None:
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if isinstance(obj, dict) and obj.get("event") == STATE_EVENT:
        state = obj.get("state")
        return state if isinstance(state, dict) else None
    return None


def load_state(run_dir: Path) -> dict[str, Any] | None:
    """The run's last saved loop state: ``state.json`` when it is whole and as new as the
    journal's last ``state`` record, else that record (state.json missing, torn by a
    machine crash, or not yet replaced when the process died). None before any save."""
    copy = load_json(run_dir / "state.json")
    record = last_state_record(run_dir / "journal.jsonl")
    if record is None:
        return copy
    if copy is not None and _seq(copy) >= _seq(record):
        return copy
    return record


def _seq(state: Mapping[str, Any]) -> int:
    try:
        return int(state.get("journal_seq") or 0)
    except (TypeError, ValueError):
        return -1


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
        if e.get("event") != STATE_EVENT  # the run's bookkeeping, no event of the run
        and not (
            e.get("event") in STEP_EVENTS
            and any(lo <= int(e.get("seq", 0)) <= hi for lo, hi in gone)
        )
    ]
