"""Small formatting helpers shared by the report's reader and its Markdown and HTML
renderers."""

from __future__ import annotations

from looprun.report.model import FileChange, Limit

STATUS_MARK = {"ok": "✅", "failed": "❌", "error": "⛔", "skipped": "➖", "not run": "➖"}
OUTCOME_MARK = {
    "done": "✅",
    "exhausted": "⏳",
    "stalled": "🔁",
    "escalated": "🙋",
    "aborted": "🛑",
    "error": "⛔",
    "interrupted": "⏸️",
}


def money(cost: float) -> str:
    return f"${cost:.4f}"


def duration(seconds: float) -> str:
    seconds = max(0.0, float(seconds))
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def counts(change: FileChange) -> str:
    if change.added is None:
        return "binary" if change.removed is None and change.path else "?"
    return f"+{change.added} −{change.removed}"


def limit_value(limit: Limit, which: str) -> str:
    value = limit.current if which == "current" else limit.max
    if value is None:
        return "—"
    if limit.name == "max_cost_usd":
        return money(float(value))
    if limit.name == "timeout":
        return duration(float(value))
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:,}" if isinstance(value, int) else str(value)


def rule_label(rule_path: str, why: str, rule: str, rule_id: str = "") -> str:
    """``rule fix_not_passing (tests.failed > 0)`` (by its id, as explain names it; by
    its number when it has none) / ``exit conditions`` / what decided instead."""
    if rule == "exit":
        return "exit conditions hold"
    if rule_path:
        name = rule_id or rule_path
        return f"rule {name} ({why})" if why else f"rule {name}"
    return rule or "—"


def one_line(text: str, limit: int) -> str:
    """``text`` on one line, cut with an ellipsis at ``limit`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
