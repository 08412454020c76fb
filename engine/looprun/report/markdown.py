"""The report as GitHub-flavoured Markdown: fits a pull-request comment and
``$GITHUB_STEP_SUMMARY``. Every value that came from a model, a tool or a check is
escaped or fenced, so it cannot add links, images or HTML. Output is bounded: when the
full report is too long, diffs go first, then the middle of the timeline, and the
report says what was cut."""

from __future__ import annotations

import re

from looprun.report.model import Iteration, RunReport, Subloop
from looprun.report.text import (
    OUTCOME_MARK,
    STATUS_MARK,
    counts,
    duration,
    limit_value,
    money,
    rule_label,
)

# A GitHub comment holds 65,536 characters; leave room for what a workflow adds.
DEFAULT_MAX_CHARS = 60_000
_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|~>:@])")
# GFM's extended autolinks also fire on a bare ``www.`` (no scheme, no colon).
_WWW = re.compile(r"(?i)\b(www)\.")


def esc(text: object) -> str:
    """One line of untrusted text, inert in Markdown: no markup, links or HTML."""
    line = " ".join(str(text).split())
    line = line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    line = _SPECIAL.sub(r"\\\1", line)
    return _WWW.sub(r"\1\\.", line)


def code(text: object) -> str:
    """Inline code that survives backticks inside."""
    line = " ".join(str(text).split()).replace("|", "\\|")
    ticks = "`" * (max((len(m) for m in re.findall(r"`+", line)), default=0) + 1)
    pad = " " if line.startswith("`") or line.endswith("`") else ""
    return f"{ticks}{pad}{line}{pad}{ticks}" if line else ""


def anchor(text: str) -> str:
    """An HTML id / URL fragment made only of safe characters: a sub-run id read from
    a run directory is not trusted to be one."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", text)


def fence(text: str, lang: str = "") -> str:
    ticks = "`" * max(3, max((len(m) for m in re.findall(r"`{3,}", text)), default=0) + 1)
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}"


def render_markdown(report: RunReport, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """The report within ``max_chars``; what had to go is said at the end."""
    full = _render(report, diffs=True, keep=None)
    if len(full) <= max_chars:
        return full
    without = _render(report, diffs=False, keep=None)
    cut = [f"diffs left out ({len(full) - len(without):,} characters)"]
    if len(without) <= max_chars - 200:
        return without + _cut_note(report, cut)
    keep = len(report.iterations)
    text = without
    while keep > 2 and len(text) > max_chars - 300:
        keep = max(2, keep // 2)
        text = _render(report, diffs=False, keep=keep)
    if keep < len(report.iterations):
        cut.append(
            f"{len(report.iterations) - keep} of {len(report.iterations)} iterations left out "
            "of the timeline (the first and the last are shown)"
        )
    if len(text) > max_chars - 300:
        cut.append(f"cut at {max_chars:,} characters")
        text = text[: max_chars - 300].rsplit("\n", 1)[0] + "\n"
    return text + _cut_note(report, cut)


def _cut_note(report: RunReport, cut: list[str]) -> str:
    return (
        "\n> [!NOTE]\n> This report was shortened to fit: " + "; ".join(cut) + ". "
        f"The whole report: `looprun report {report.run_id} --format html`.\n"
    )


def _render(report: RunReport, *, diffs: bool, keep: int | None, level: int = 2) -> str:
    h = "#" * level
    out: list[str] = []
    mark = OUTCOME_MARK.get(report.outcome, "")
    out.append(
        f"{h} looprun {esc(report.template)}: {mark} {esc(report.outcome)} "
        f"after {len(report.iterations)} iteration(s)"
    )
    out.append("")
    out.append(f"**Intent:** {esc(report.intent) or '—'}")
    out.append("")
    reason = f" ({code(report.code)})" if report.code else ""
    out.append(f"**Outcome:** {esc(report.outcome)}{reason}: {esc(report.reason)}")
    out.append("")
    models = ", ".join(f"{esc(k)} {code(v)}" for k, v in report.models.items())
    out.append(
        f"Run {code(report.run_id)} · started {esc(report.started or '?')} · "
        f"{duration(report.duration_s)} · **{report.tokens:,} tokens** "
        f"({report.prompt_tokens:,} in, {report.completion_tokens:,} out) · "
        f"**{money(report.cost_usd)}**" + (f" · models: {models}" if models else "")
    )
    if report.standing or report.next_step:
        out += ["", f"{h}# Where it stands", ""]
        out += [f"- {esc(line)}" for line in report.standing]
        if report.next_step:
            out.append(f"- continue with: {code(report.next_step)}")
    if report.plan:
        out += ["", f"{h}# Plan", "", "| task | goal | done when | outcome | iterations |"]
        out.append("|---|---|---|---|---|")
        for t in report.plan:
            out.append(
                f"| {code(t.id)} | {esc(_first_line(t.goal))} | {code(t.done_when) or '—'} | "
                f"{esc(t.outcome or '—')} | {t.iterations} |"
            )
    if report.subloops:
        out += ["", f"{h}# Sub-loops", ""]
        out += _tree(report.subloops, "")
    out += ["", f"{h}# Timeline", ""]
    out += [
        "| # | task | tools | checks | decision | rule | tokens | cost |",
        "|---|---|---|---|---|---|---|---|",
    ]
    shown = _shown(report.iterations, keep)
    for it in shown:
        if it is None:
            out.append("| … | | | | | | | |")
            continue
        checks = " ".join(f"{STATUS_MARK.get(c.status, '')}{esc(c.name)}" for c in it.checks)
        nxt = it.next if it.next == it.decision else f"{it.decision} → {it.next}"
        out.append(
            f"| {it.number} | {code(it.task)} | {esc(it.tools)} | {checks} | {esc(nxt)} | "
            f"{esc(rule_label(it.rule_path, it.why, it.rule, it.rule_id))} | {it.tokens:,} | "
            f"{money(it.cost_usd)} |"
        )
    for it in shown:
        if it is not None:
            out += ["", *_iteration(it, diffs)]
    if report.limits:
        out += ["", f"{h}# Limits", "", "| limit | used | cap |", "|---|---|---|"]
        for lim in report.limits:
            out.append(
                f"| {code(lim.name)} | {limit_value(lim, 'current')} | {limit_value(lim, 'max')} |"
            )
    if report.changed:
        out += ["", f"{h}# Files changed", ""]
        out += [f"- {code(c.path)} {counts(c)}" for c in report.changed]
    if report.events:
        out += ["", f"{h}# Events", ""]
        out += [f"- {esc(e)}" for e in report.events]
    for note in report.notes:
        out += ["", f"> {esc(note)}"]
    for sub in report.subloops:
        if sub.report is not None:
            out += ["", f'<a id="{anchor(sub.anchor)}"></a>', ""]
            out.append(_render(sub.report, diffs=diffs, keep=keep, level=min(level + 1, 4)))
    return "\n".join(out).rstrip() + "\n"


def _first_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[0] + (" …" if len(lines) > 1 else "") if lines else ""


def _shown(iterations: tuple[Iteration, ...], keep: int | None) -> list[Iteration | None]:
    if keep is None or len(iterations) <= keep:
        return list(iterations)
    head = keep // 2
    return [*iterations[:head], None, *iterations[len(iterations) - (keep - head) :]]


def _tree(nodes: tuple[Subloop, ...], indent: str) -> list[str]:
    out = []
    for s in nodes:
        link = f"[{esc(s.id)}](#{anchor(s.anchor)})" if s.report is not None else esc(s.id)
        out.append(
            f"{indent}- {link} ({esc(s.template)}): {OUTCOME_MARK.get(s.outcome, '')} "
            f"{esc(s.outcome)} after {s.iterations} iteration(s), {s.tokens:,} tokens"
            + (f" — {esc(s.reason)}" if s.reason else "")
        )
        if s.report is not None and s.report.subloops:
            out += _tree(s.report.subloops, indent + "  ")
    return out


def _iteration(it: Iteration, diffs: bool) -> list[str]:
    out = [
        "<details>",
        f"<summary>#{it.number} {esc(it.task)}: {esc(it.tools)} → {esc(it.next)}</summary>",
        "",
    ]
    if it.tool_calls:
        out.append(
            "Tools: "
            + ", ".join(
                f"{code(c.tool)} {code(c.target)}{' (refused)' if c.error else ''}".rstrip()
                for c in it.tool_calls
            )
        )
        out.append("")
    if it.files:
        out.append("Files: " + ", ".join(f"{code(f.path)} {counts(f)}" for f in it.files))
        out.append("")
    for c in it.checks:
        line = f"- {STATUS_MARK.get(c.status, '')} {esc(c.name)}: {esc(c.status)}"
        if c.first_failure:
            line += f" — {code(c.first_failure)}"
        out.append(line)
    if it.exit:
        out.append("")
        out.append(
            "Exit conditions: "
            + "; ".join(f"{code(cond)} {'✅' if ok else '❌'}" for cond, ok in it.exit)
        )
    out += [
        "",
        f"Decision: **{esc(it.decision)}** by "
        f"{esc(rule_label(it.rule_path, it.why, it.rule, it.rule_id))}"
        + (f" at {code(it.rule)}" if it.rule_path else ""),
    ]
    if it.next != it.decision:
        out.append(f"then **{esc(it.next)}**: {esc(it.next_reason)}")
    for p in it.policy:
        out.append(f"- policy: {esc(p)}")
    if it.message and it.decision != "done":
        out += ["", fence(it.message[:2000])]
    if diffs and it.diff:
        out += ["", fence(it.diff, "diff")]
    if it.diff_note:
        out += ["", f"_{esc(it.diff_note)}_"]
    out += ["", "</details>"]
    return out
