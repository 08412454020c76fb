"""Compact feedback for the next act step, and a deterministic summary of earlier attempts.

The model gets what failed and where (the parsers' bounded feedback), never a whole log.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from looprun.observe.base import Observation
from looprun.observe.feedback import clip

MAX_FEEDBACK_CHARS = 6_000


def _cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - limit} characters cut ...]\n{text[-tail:]}"


_RUN_FILES = re.compile(r"\S*\.looprun/runs/[^/\s]+/")  # the run directory: noise in one line
_LINE_CAP = 160


def _clip(text: str, limit: int) -> str:
    """One line of at most ``limit`` characters: white space folded, the cut marked."""
    return clip(" ".join(text.split()), limit)


def _first_failure(obs: Observation) -> str:
    """``tests/test_x.py::test_y: ZeroDivisionError: division by zero (+2 more)``."""
    bad = [i for i in obs.items if i.severity in ("error", "failure")] or list(obs.items)
    if not bad:
        return ""
    item = bad[0]
    where = f"{item.file}:{item.line}" if item.file and item.line else item.file or ""
    label = item.id or item.rule or where
    if item.rule and item.rule != label:
        label = f"{item.rule} {label}"
    if where and (item.file or where) not in label:  # a test id names its own file
        label = f"{label} ({where})"
    message = item.message.strip().splitlines()[0] if item.message.strip() else ""
    more = f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""
    return _clip(f"{label}: {message}" if message else label, _LINE_CAP) + more


def _error_summary(obs: Observation) -> str:
    """The error's first line, and what the command said last (``sh: pytestx: not found``)."""
    error = obs.error or ""
    head = _RUN_FILES.sub("", error.strip().splitlines()[0] if error.strip() else "")
    said = [
        ln.strip()
        for ln in obs.feedback.splitlines()
        if len(ln.strip()) > 3 and ln.strip() not in error and not _RUN_FILES.search(ln)
    ]
    if said:
        head = f"{head}: {said[-1]}" if head else said[-1]
    return _clip(head, _LINE_CAP)


def observation_line(name: str, obs: Observation) -> str:
    """``tests: ok`` / ``tests: FAILED (4 tests, 1 failed: test_id: message)`` — one line
    per observer that says what failed, so a person reading progress need not open a file."""
    if not obs.ran:  # skipped by its `when`, or not run at all (a timeout came first)
        return f"{name}: not run" if obs.error else f"{name}: skipped"
    if obs.error:
        return f"{name}: ERROR ({_error_summary(obs)})"
    if obs.ok:
        return f"{name}: ok"
    counts = ", ".join(f"{v} {k}" for k, v in obs.counts.items() if v and k != "passed")
    first = _first_failure(obs)
    detail = f"{counts}: {first}" if counts and first else counts or first
    return f"{name}: FAILED" + (f" ({detail})" if detail else "")


def observer_blocks(observations: Mapping[str, Observation]) -> dict[str, str]:
    """``[name]`` and its feedback, for each observer that failed or could not run."""
    out: dict[str, str] = {}
    for name, obs in observations.items():
        if not obs.ran or (obs.ok and not obs.error):
            continue
        body = obs.feedback.strip() or obs.error or observation_line(name, obs)
        out[name] = f"[{name}]\n{body}"
    return out


def with_unnamed(
    message: str, named: Iterable[str], blocks: Mapping[str, str], limit: int = MAX_FEEDBACK_CHARS
) -> str:
    """A rule's retry message, followed by the feedback of every failing observer the
    message does not read: a failing check reaches the model even if no rule names it."""
    seen = set(named)
    extra = [b for name, b in blocks.items() if name not in seen and b not in message]
    if not extra:
        return message
    return _cap("\n\n".join([message, *extra]) if message else "\n\n".join(extra), limit)


def compose(
    observations: Mapping[str, Observation],
    policy_summary: str = "",
    failed_conditions: Sequence[str] = (),
    limit: int = MAX_FEEDBACK_CHARS,
) -> str:
    """Feedback from every failing observer, policy refusals, and unmet exit conditions."""
    parts: list[str] = list(observer_blocks(observations).values())
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


ATTEMPTS_KEPT = 12  # attempt lines a run keeps (and shows); earlier ones are only counted


def attempts_summary(lines: Sequence[str], keep: int = ATTEMPTS_KEPT, earlier: int = 0) -> str:
    """The last ``keep`` attempt lines; ``earlier`` attempts were dropped before."""
    if not lines:
        return ""
    shown = list(lines[-keep:])
    hidden = earlier + max(0, len(lines) - keep)
    if hidden:
        shown.insert(0, f"({hidden} earlier attempts not shown)")
    return "Earlier attempts:\n" + "\n".join(shown)
