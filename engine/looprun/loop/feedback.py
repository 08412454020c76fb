"""Compact feedback for the next act step, and a deterministic summary of earlier attempts.

The model gets what failed and where (the parsers' bounded feedback), never a whole log.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from looprun.observe.base import Observation

MAX_FEEDBACK_CHARS = 6_000


def _cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - limit} characters cut ...]\n{text[-tail:]}"


def observation_line(name: str, obs: Observation) -> str:
    """``tests: ok`` / ``tests: FAILED (2 failed)`` — one line per observer."""
    if not obs.ran:
        return f"{name}: skipped"
    if obs.error:
        return f"{name}: ERROR ({obs.error.splitlines()[0][:120] if obs.error else ''})"
    counts = ", ".join(f"{v} {k}" for k, v in obs.counts.items() if v and k != "passed")
    if obs.ok:
        return f"{name}: ok"
    return f"{name}: FAILED" + (f" ({counts})" if counts else "")


def compose(
    observations: Mapping[str, Observation],
    policy_summary: str = "",
    failed_conditions: Sequence[str] = (),
    limit: int = MAX_FEEDBACK_CHARS,
) -> str:
    """Feedback from every failing observer, policy refusals, and unmet exit conditions."""
    parts: list[str] = []
    for name, obs in observations.items():
        if not obs.ran or (obs.ok and not obs.error):
            continue
        body = obs.feedback.strip() or obs.error or observation_line(name, obs)
        parts.append(f"[{name}]\n{body}")
    if policy_summary:
        parts.append(f"[policy]\n{policy_summary}")
    if failed_conditions:
        parts.append("Exit conditions not yet met: " + "; ".join(failed_conditions))
    return _cap("\n\n".join(parts), limit)


def attempt_line(
    iteration: int,
    task: str,
    tools: Iterable[str],
    observations: Mapping[str, Observation],
    decision: str,
) -> str:
    """One line per iteration, the same for the same facts: ``#2 fix: edit_file×1 → ...``."""
    counts: dict[str, int] = {}
    for tool in tools:
        counts[tool] = counts.get(tool, 0) + 1
    used = ", ".join(f"{t}×{n}" for t, n in counts.items()) or "no tools"
    seen = "; ".join(observation_line(n, o) for n, o in observations.items()) or "no observers"
    return f"#{iteration} {task}: {used} → {seen} → {decision}"


def attempts_summary(lines: Sequence[str], keep: int = 12) -> str:
    if not lines:
        return ""
    shown = list(lines[-keep:])
    if len(lines) > keep:
        shown.insert(0, f"({len(lines) - keep} earlier attempts not shown)")
    return "Earlier attempts:\n" + "\n".join(shown)
