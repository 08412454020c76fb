"""Read a run directory into a :class:`RunReport`: ``run.json``, ``journal.jsonl`` (without
superseded steps), ``observe/<n>.json``, ``exchanges.jsonl``, the saved state
(``state.json`` or the journal's last ``state`` record), ``summary.json`` and the
checkpoint refs. A file that is missing or torn leaves its part
of the report out with a note; it never stops the report."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from looprun.errors import UsageError
from looprun.journal.read import current_events, load_state, read_jsonl
from looprun.journal.runs import RUNS_DIR, find_run
from looprun.loop.verdict import left_failing
from looprun.report.iterations import read_iterations
from looprun.report.model import (
    FileChange,
    Iteration,
    Limit,
    RunReport,
    Subloop,
    Task,
)
from looprun.report.text import one_line
from looprun.report.trees import Trees

RESUMABLE = ("interrupted", "error")


def locate(workdir: Path, run_id: str) -> Path:
    """The directory of ``run_id``: a run under ``workdir``, a sub-run written
    ``OUTER.task-1``, or a path to a run directory."""
    as_path = Path(run_id).expanduser()
    if "/" in run_id and (as_path / "journal.jsonl").is_file():
        return as_path.resolve()
    if "." in run_id and not run_id.startswith("."):
        outer, _, name = run_id.partition(".")
        try:
            outer_dir = find_run(workdir, outer)
        except UsageError:
            outer_dir = None
        path = _sub_dir(outer_dir, name) if outer_dir is not None else None
        if path is not None:
            return path
    return find_run(workdir, run_id)


def _sub_dir(outer: Path, dotted: str) -> Path | None:
    """``<outer>/subloops/a-1`` for ``a-1``; nested sub-runs are ``a-1.b-1``."""
    path = outer
    for part in dotted.split("."):
        path = path / "subloops" / part
    return path if (path / "journal.jsonl").is_file() else None


def _load(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _top_run_dir(run_dir: Path) -> Path:
    """The outermost run directory (the one directly under ``.../runs/``)."""
    path = run_dir
    while path.parent.name == "subloops":
        path = path.parent.parent
    return path


def trees_for(run_dir: Path) -> Trees:
    """The repository holding a run's checkpoints (shared with its sub-runs' worktrees)."""
    top = _top_run_dir(run_dir)
    invocation = _load(top / "run.json") or {}
    state_dir = top.parent.parent  # <state>/runs/<id>
    workdir = Path(invocation.get("workdir") or state_dir.parent)
    if top.parent.name != RUNS_DIR.name:
        state_dir = workdir / RUNS_DIR.parent
    return Trees.for_run(workdir, state_dir)


def build_report(run_dir: Path, trees: Trees | None = None) -> RunReport:
    """The report of the run in ``run_dir`` (and of its sub-runs, nested)."""
    trees = trees if trees is not None else trees_for(run_dir)
    notes: list[str] = []
    invocation = _load(run_dir / "run.json") or {}
    summary = _load(run_dir / "summary.json")
    state = load_state(run_dir) or {}
    events = current_events(read_jsonl(run_dir / "journal.jsonl"))
    if not events:
        notes.append("journal.jsonl is missing or empty")
    run_id = run_dir.name if not events else str(events[0].get("run_id") or run_dir.name)
    started = next((e for e in events if e.get("event") == "run_started"), {})
    finished = [e for e in events if e.get("event") == "run_finished"]
    records = _records(run_dir)
    iterations = read_iterations(run_dir, records, events, trees, run_id, started)
    outcome, reason, code, exit_code = _outcome(summary, state, finished)
    plan = _plan(events, summary)
    totals = (summary or {}).get("usage") or {}
    prompt = int(totals.get("prompt_tokens", state.get("prompt_tokens", 0)) or 0)
    completion = int(totals.get("completion_tokens", state.get("completion_tokens", 0)) or 0)
    cost = float(totals.get("cost_usd", state.get("cost_usd", 0.0)) or 0.0)
    limits = _limits(finished[-1] if finished else {}, records, started)
    changed = _changed(trees, started.get("base") or state.get("base"), run_id, iterations)
    standing, next_step = _standing(outcome, summary, state, run_id)
    return RunReport(
        run_id=run_id,
        template=str(started.get("template") or invocation.get("template") or "?"),
        intent=str(started.get("intent") or invocation.get("intent") or ""),
        started=str(invocation.get("started") or ""),
        duration_s=float((summary or {}).get("duration_s", state.get("elapsed_s", 0.0)) or 0.0),
        models={k: str(v) for k, v in (invocation.get("models") or {}).items() if v},
        outcome=outcome,
        reason=reason,
        code=code,
        exit_code=exit_code,
        plan=plan,
        iterations=iterations,
        prompt_tokens=prompt,
        completion_tokens=completion,
        cost_usd=cost,
        limits=limits,
        changed=changed,
        standing=standing,
        next_step=next_step,
        subloops=_subloops(run_dir, summary, trees),
        events=_notable(events),
        notes=tuple(notes),
    )


def _records(run_dir: Path) -> dict[int, dict[str, Any]]:
    out = {}
    for path in (run_dir / "observe").glob("*.json"):
        if path.stem.isdigit():
            rec = _load(path)
            if rec is not None and not rec.get("baseline"):  # 0.json: the baseline
                out[int(path.stem)] = rec
    return out


def _outcome(
    summary: Mapping[str, Any] | None, state: Mapping[str, Any], finished: list[dict[str, Any]]
) -> tuple[str, str, str, int | None]:
    stop = state.get("stop") or {}
    if state.get("pending"):
        paths = ", ".join((state.get("pending") or {}).get("paths") or [])
        return "escalated", f"waiting for approval of {paths}", "approval", 5
    if summary is not None and (stop or summary.get("outcome") == "interrupted"):
        return (
            str(summary.get("outcome", "?")),
            str(summary.get("reason", "")),
            str(summary.get("code", "")),
            summary.get("exit_code"),
        )
    if finished:
        last = finished[-1]
        return (
            str(last.get("outcome")),
            str(last.get("reason", "")),
            str(last.get("code", "")),
            None,
        )
    return "interrupted", "no outcome recorded (the run was killed or is still going)", "", None


def _plan(events: list[dict[str, Any]], summary: Mapping[str, Any] | None) -> tuple[Task, ...]:
    plans = [e for e in events if e.get("event") == "plan"]
    results = {t.get("id"): t for t in (summary or {}).get("tasks") or () if isinstance(t, dict)}
    tasks = []
    for t in (plans[-1].get("tasks") or []) if plans else []:
        r = results.get(t.get("id"), {})
        tasks.append(
            Task(
                str(t.get("id", "")),
                str(t.get("goal", "")),
                str(t.get("done_when") or ""),
                str(r.get("outcome", "pending" if results else "")),
                int(r.get("iterations", 0) or 0),
            )
        )
    return tuple(tasks)


def _limits(
    finished: Mapping[str, Any],
    records: Mapping[int, Mapping[str, Any]],
    started: Mapping[str, Any],
) -> tuple[Limit, ...]:
    rows = finished.get("limits")
    if not rows and records:
        rows = records[max(records)].get("limits")
    if not rows:
        rows = started.get("limits")
    return tuple(
        Limit(str(r.get("limit")), r.get("current"), r.get("max"))
        for r in rows or ()
        if isinstance(r, dict)
    )


def _changed(
    trees: Trees, base: str | None, run_id: str, iterations: tuple[Iteration, ...]
) -> tuple[FileChange, ...]:
    """What the run changed in all: its base against its last checkpoint."""
    if not base or not iterations:
        return ()
    start = trees.resolve(base)
    end = trees.resolve(iterations[-1].checkpoint) or trees.resolve(
        f"{run_id}/{iterations[-1].number}"
    )
    if start is None or end is None:
        return ()
    return trees.numstat(start, end) or ()


def _standing(
    outcome: str, summary: Mapping[str, Any] | None, state: Mapping[str, Any], run_id: str
) -> tuple[tuple[str, ...], str]:
    if outcome == "done":
        still = (summary or {}).get("still_failing")
        return (tuple(left_failing(still)) if isinstance(still, Mapping) else ()), ""
    st = (summary or {}).get("state") or {}
    lines = []
    done = st.get("tasks_completed")
    if done is None:
        done = [r.get("id") for r in state.get("task_results") or () if isinstance(r, dict)]
    lines.append(f"tasks completed: {', '.join(map(str, done)) or 'none'}")
    pending = st.get("pending_approvals") or (state.get("pending") or {}).get("paths") or []
    if pending:
        lines.append(f"waiting for approval of: {', '.join(map(str, pending))}")
    failure = str(st.get("last_failure") or state.get("last_failure") or "").strip()
    if failure:
        lines.append("last failure: " + one_line(failure.splitlines()[0], 300))
    if pending:
        step = f"looprun resume {run_id} --approve   (or --reject)"
    elif outcome in RESUMABLE:
        step = f"looprun resume {run_id}"
    else:
        step = ""
    return tuple(lines), step


def _notable(events: list[dict[str, Any]]) -> tuple[str, ...]:
    out = []
    for e in events:
        kind = e.get("event")
        if kind == "resumed":
            out.append(f"resumed after iteration {e.get('iteration')}")
        elif kind == "approval":
            answer = {True: "approved", False: "rejected", None: "asked"}.get(e.get("answer"))
            out.append(f"approval {answer}: {', '.join(map(str, e.get('paths') or []))}")
        elif kind == "interrupted":
            out.append(f"interrupted: {e.get('reason', '')}".strip())
        elif kind == "warning":
            out.append(f"warning: {e.get('message', '')}")
        elif kind == "limit":
            out.append(f"limit in iteration {e.get('iteration')}: {e.get('reason', '')}")
    return tuple(one_line(x, 300) for x in out)


def _subloops(
    run_dir: Path, summary: Mapping[str, Any] | None, trees: Trees
) -> tuple[Subloop, ...]:
    rows = (summary or {}).get("subloops") or []
    out = []
    for row in rows:
        if not isinstance(row, dict):
            continue
        name = f"{row.get('id')}-{row.get('attempt', 1)}"
        sub_dir = run_dir / "subloops" / name
        report = build_report(sub_dir, trees) if (sub_dir / "journal.jsonl").is_file() else None
        out.append(
            Subloop(
                id=str(row.get("id", "")),
                template=str(row.get("template", "")),
                outcome=str(row.get("outcome", "")),
                reason=str(row.get("reason", "")),
                iterations=int(row.get("iterations", 0) or 0),
                tokens=int(row.get("tokens", 0) or 0),
                run_id=report.run_id if report is not None else "",
                anchor="run-" + (report.run_id if report is not None else name).replace(".", "-"),
                report=report,
            )
        )
    return tuple(out)
