"""The iterations of a run's report: what each one did (tool calls, an agent CLI's turn),
what its checks said, what it decided, what it cost, and its diff from the checkpoints."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from looprun.journal.read import read_jsonl
from looprun.report.model import Check, FileChange, Iteration, ToolCall
from looprun.report.text import one_line
from looprun.report.trees import Trees

DIFF_CAP = 20_000  # characters of one iteration's diff kept in a report


def read_iterations(
    run_dir: Path,
    records: Mapping[int, Mapping[str, Any]],
    events: list[dict[str, Any]],
    trees: Trees,
    run_id: str,
    started: Mapping[str, Any],
) -> tuple[Iteration, ...]:
    """Each recorded iteration of the run, in order, from its observation ``records``
    (by number) and the journal's ``events``."""
    usage_by_iteration = _exchange_usage(run_dir)
    return tuple(
        _iteration(n, records.get(n, {}), ev, events, usage_by_iteration, trees, run_id, started)
        for n, ev in _iteration_events(events, records)
    )


def _iteration_events(
    events: list[dict[str, Any]], records: Mapping[int, Any]
) -> list[tuple[int, dict[str, Any]]]:
    """Each recorded iteration once (the last event wins), in order."""
    by_number: dict[int, dict[str, Any]] = {}
    for e in events:
        if e.get("event") == "iteration" and isinstance(e.get("iteration"), int):
            by_number[e["iteration"]] = e
    for n in records:
        by_number.setdefault(n, {})
    return sorted(by_number.items())


def _exchange_usage(run_dir: Path) -> dict[int, tuple[int, float]]:
    """Tokens and cost of the model exchanges per iteration (act turns and replans)."""
    out: dict[int, tuple[int, float]] = {}
    for x in read_jsonl(run_dir / "exchanges.jsonl"):
        n = x.get("iteration")
        usage = x.get("usage") or {}
        if not isinstance(n, int) or not isinstance(usage, dict):
            continue
        tokens = int(usage.get("prompt_tokens", 0) or 0) + int(
            usage.get("completion_tokens", 0) or 0
        )
        t0, c0 = out.get(n, (0, 0.0))
        out[n] = (t0 + tokens, c0 + float(usage.get("cost_usd", 0.0) or 0.0))
    return out


def _iteration(
    n: int,
    rec: Mapping[str, Any],
    event: Mapping[str, Any],
    events: list[dict[str, Any]],
    exchange_usage: Mapping[int, tuple[int, float]],
    trees: Trees,
    run_id: str,
    started: Mapping[str, Any],
) -> Iteration:
    decision = rec.get("decision") or event.get("decision") or {}
    nxt = rec.get("next") or event.get("stop") or decision
    lines = event.get("observers") or {}
    checks = tuple(
        _check(name, facts, str(lines.get(name, "")))
        for name, facts in (rec.get("observers") or {}).items()
    ) or tuple(Check(name, _status_of_line(line), line) for name, line in lines.items())
    usage = rec.get("usage") or event.get("usage")
    if isinstance(usage, dict):
        tokens, cost = int(usage.get("tokens", 0) or 0), float(usage.get("cost_usd", 0) or 0)
    else:
        tokens, cost = exchange_usage.get(n, (0, 0.0))
    calls = tuple(
        _tool_call(e) for e in events if e.get("event") == "tool_call" and e.get("iteration") == n
    ) + _agent_calls(events, n)
    policy = rec.get("policy") or {}
    items = tuple(
        f"{i.get('tool', '')}: {i.get('message', '')}".strip(": ")
        for i in policy.get("items") or ()
        if isinstance(i, dict)
    )
    start = rec.get("start") or _previous_checkpoint(n, events) or started.get("base") or ""
    end = trees.resolve(f"{run_id}/{n}")
    start_tree = trees.resolve(str(start)) if start else None
    diff, note, files = "", "", ()
    if end is None or start_tree is None:
        note = "the checkpoint is not in this repository (pruned, or another clone)"
    else:
        diff = trees.diff(start_tree, end) or ""
        files = trees.numstat(start_tree, end) or ()
        if len(diff) > DIFF_CAP:
            note = f"diff cut at {DIFF_CAP:,} of {len(diff):,} characters"
            diff = diff[:DIFF_CAP]
    if not files and end is None:
        files = tuple(FileChange(p, None, None) for e in calls for p in e.changed)
    stop_like = "outcome" in nxt
    return Iteration(
        number=n,
        task=str(event.get("task") or (rec.get("task") or {}).get("id") or ""),
        task_iteration=int(rec.get("task_iteration", 0) or 0),
        tool_calls=tuple(c.call for c in calls),
        files=tuple(files),
        checks=checks,
        exit=tuple(
            (str(x.get("condition", "")), bool(x.get("value"))) for x in rec.get("exit") or ()
        ),
        decision=str(decision.get("action", "")),
        rule=str(decision.get("rule", "")),
        rule_path=str(decision.get("path", "")),
        rule_id=str(decision.get("id") or ""),
        why=str(decision.get("condition", "")),
        message=str(decision.get("message", "")),
        next=str(nxt.get("outcome") if stop_like else nxt.get("action", "")),
        next_reason=str(nxt.get("reason", "")) if stop_like else "",
        tokens=tokens,
        cost_usd=cost,
        policy=items,
        diff=diff,
        diff_note=note,
        checkpoint=str(event.get("checkpoint") or rec.get("checkpoint") or ""),
    )


class _Call:
    def __init__(self, call: ToolCall, changed: tuple[str, ...]):
        self.call, self.changed = call, changed


def _tool_call(e: Mapping[str, Any]) -> _Call:
    args = e.get("arguments")
    target = ""
    if isinstance(args, dict):
        target = str(args.get("path") or args.get("command") or args.get("pattern") or "")
    result = str(e.get("result") or "").strip().splitlines()
    changed = tuple(str(p) for p in e.get("changed") or ())
    return _Call(
        ToolCall(
            str(e.get("tool", "")),
            one_line(target, 120),
            bool(e.get("is_error")),
            one_line(result[0] if result else "", 160),
        ),
        changed,
    )


def _agent_calls(events: list[dict[str, Any]], n: int) -> tuple[_Call, ...]:
    """An agent CLI's turn (act.agent): its tool calls in its own names, and the calls
    its permission rules refused, marked as refused."""
    out: list[_Call] = []
    for e in events:
        if e.get("event") != "agent_turn" or e.get("iteration") != n:
            continue
        cli = str(e.get("cli") or "agent")
        out += [_Call(ToolCall(f"{cli}:{t}", "", False), ()) for t in e.get("tools") or ()]
        out += [
            _Call(ToolCall(f"{cli}:refused", one_line(str(d), 120), True), ())
            for d in e.get("denied") or ()
        ]
    return tuple(out)


def _previous_checkpoint(n: int, events: list[dict[str, Any]]) -> str:
    for e in events:
        if e.get("event") == "iteration" and e.get("iteration") == n - 1:
            return str(e.get("checkpoint") or "")
    return ""


def _status_of_line(line: str) -> str:
    for word, status in (
        ("FAILED", "failed"),
        ("ERROR", "error"),
        ("not run", "not run"),
        ("skipped", "skipped"),
    ):
        if word in line:
            return status
    return "ok"


def _check(name: str, facts: Mapping[str, Any], line: str) -> Check:
    if not facts.get("ran", True):
        status = "not run" if facts.get("error") else "skipped"
    elif facts.get("error"):
        status = "error"
    else:
        status = "ok" if facts.get("ok") else "failed"
    first = ""
    if status in ("failed", "error"):
        first = _first_failure(facts) or one_line(str(facts.get("error") or ""), 300)
    return Check(name, status, line or f"{name}: {status}", first)


def _first_failure(facts: Mapping[str, Any]) -> str:
    items = [i for i in facts.get("items") or () if isinstance(i, dict)]
    bad = [i for i in items if i.get("severity") in ("error", "failure")] or items
    if not bad:
        return ""
    item = bad[0]
    where = f"{item.get('file')}:{item.get('line')}" if item.get("line") else item.get("file")
    label = str(item.get("id") or item.get("rule") or where or "")
    if where and str(item.get("file")) not in label:
        label = f"{label} ({where})"
    message = str(item.get("message") or "").strip()
    message = message.splitlines()[0] if message else ""
    return one_line(f"{label}: {message}" if message else label, 300)
