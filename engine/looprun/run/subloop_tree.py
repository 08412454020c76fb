"""The summary's tree of sub-loops, and its lines on stderr."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def tree_rows(listed: Any, records: Mapping[str, Mapping[str, Any]]) -> tuple[dict[str, Any], ...]:
    """Per task its template, outcome, iterations, tokens, what was kept for inspection,
    and the tree of a sub-loop that is itself an outer loop (``listed``: the
    ``subloops.list`` facts)."""
    rows = []
    for r in listed:
        rec = records.get(r["id"], {})
        row = {k: r[k] for k in ("id", "template", "outcome", "reason", "iterations")}
        row |= {"attempt": r["attempt"], "tokens": r["tokens"]}
        if r["agent"]:
            row["agent"] = r["agent"]
        kept = rec.get("worktree") or rec.get("kept_ref")
        if kept and r["outcome"] != "done":
            row |= {"kept": kept, "branch": rec.get("branch")}
        if rec.get("earlier"):
            row["earlier_attempts"] = list(rec["earlier"])
        sub = _summary_tree(rec.get("run_dir"))
        if sub:
            row["subloops"] = sub
        rows.append(row)
    return tuple(rows)


def _summary_tree(run_dir: str | None) -> list[dict[str, Any]]:
    """A nested outer sub-loop's own tree, from its summary."""
    if not run_dir:
        return []
    try:
        data = json.loads((Path(run_dir) / "summary.json").read_text("utf-8"))
    except (OSError, ValueError):
        return []
    sub = data.get("subloops") if isinstance(data, dict) else None
    return sub if isinstance(sub, list) else []


def tree_lines(rows: Any, indent: str) -> list[str]:
    lines = []
    for i, r in enumerate(rows):
        last = i == len(rows) - 1
        kept = f"  kept: {r['kept']}" if r.get("kept") else ""
        lines.append(
            f"{indent}{'└─' if last else '├─'} {r['id']:<{max(8, 18 - len(indent))}} "
            f"{r['template'] or '-':<14} "
            f"{r['outcome']:<10} {r['iterations']:>3} it {r['tokens']:>8} tok{kept}"
        )
        more = indent + ("   " if last else "│  ")
        for e in r.get("earlier_attempts") or []:
            lines.append(f"{more}  (attempt {e['attempt']}: {e['outcome']}, kept: {e['kept']})")
        lines += tree_lines(r.get("subloops") or [], more)
    return lines
