"""The lines printed under a verdict that is not ``done``: where the run stands and how
to go on, so a person (or a CI log) sees what happened without opening the journal."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from looprun.loop.outcome import RunResult


def where_it_stands(result: RunResult, ws: Any = None) -> list[str]:
    """The lines under a verdict that is not ``done``: tasks completed, what changed
    (with line counts), the last failure's first lines, and how to go on."""
    done = [t.id for t in result.tasks if t.outcome == "done"]
    lines = [f"  tasks completed: {', '.join(done) or 'none'} ({len(done)} of {len(result.tasks)})"]
    lines.append("  changed so far: " + (_diff_stat(result, ws) or "nothing"))
    failure = _failure_lines(result.last_failure)
    if failure:
        lines.append("  last failure: " + failure[0])
        lines.extend("    " + ln for ln in failure[1:])
    lines.append(f"  run: {result.run_dir}")
    if result.resumable:
        lines.append(f"  continue with: looprun resume {result.run_id}")
    return lines


def left_failing(still: Mapping[str, Sequence[str]], shown: int = 8) -> list[str]:
    """``done, but 5 tests that failed at the start still fail: a, b, ...``: one line per
    observer whose baseline failures a finished run left failing (none when it left none)."""
    lines = []
    for name, ids in still.items():
        if not ids:
            continue
        noun = "tests" if name == "tests" else f"{name} failures"
        if len(ids) == 1:
            noun = noun[:-1]
        more = f", ... {len(ids) - shown} more" if len(ids) > shown else ""
        names = ", ".join(ids[:shown]) + more
        verb = "still fails" if len(ids) == 1 else "still fail"
        lines.append(f"done, but {len(ids)} {noun} that failed at the start {verb}: {names}")
    return lines


def _diff_stat(result: RunResult, ws: Any) -> str:
    rows: list[tuple[str, int | None, int | None]] = []
    if ws is not None:
        try:
            rows = ws.numstat()  # against the run's recorded base
        except Exception:  # the stat is a courtesy; the file list below still says what changed
            rows = []
    if not rows:
        return ", ".join(result.diff_stat)
    shown = [
        f"{path} (binary)" if added is None else f"{path} (+{added} -{removed})"
        for path, added, removed in rows[:12]
    ]
    if len(rows) > 12:
        shown.append(f"... {len(rows) - 12} more")
    return ", ".join(shown)


def _failure_lines(text: str, keep: int = 3) -> list[str]:
    """The first lines that say something: no ``[observer]`` headers, no traceback body."""
    out = []
    for line in text.splitlines():
        if not line.strip() or line.startswith((" ", "\t")) or line.strip().startswith("["):
            continue
        out.append(line.strip() if len(line) <= 200 else line.strip()[:199] + "…")
        if len(out) == keep:
            break
    return out
