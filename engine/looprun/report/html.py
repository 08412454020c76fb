"""The report as one self-contained HTML file: inline CSS, no script, no external
reference (a Content-Security-Policy forbids every fetch), iterations and diffs in
``<details>``. Rendered by Jinja2 with autoescaping on, so model and check output is
text, never markup."""

from __future__ import annotations

from pathlib import Path

import jinja2

from looprun.report.model import RunReport
from looprun.report.text import (
    counts,
    duration,
    limit_value,
    money,
    rule_label,
)

_HERE = Path(__file__).resolve().parent
# marks every font has (no emoji: a machine without an emoji font shows boxes)
_MARKS = {"ok": "✓", "failed": "✗", "error": "!", "skipped": "–", "not run": "–"}


def _diff_class(line: str) -> str:
    if line.startswith(("+++", "---", "diff ", "index ", "new file", "deleted file")):
        return "meta"
    return {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "")


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(_HERE)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(
        money=money,
        duration=duration,
        counts=counts,
        limit_value=limit_value,
        rule_label=rule_label,
        diff_class=_diff_class,
        status_mark=_MARKS,
    )
    return env


def render_html(report: RunReport) -> str:
    return _environment().get_template("report.html.j2").render(r=report)
