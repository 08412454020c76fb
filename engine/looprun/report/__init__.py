"""Run reports a reviewer reads: what a loop was asked, what it did in each iteration,
what it decided and why, what it changed and what it cost (``looprun report``)."""

from __future__ import annotations

import json
from pathlib import Path

from looprun.errors import UsageError
from looprun.report.html import render_html
from looprun.report.markdown import DEFAULT_MAX_CHARS, render_markdown
from looprun.report.model import RunReport
from looprun.report.read import build_report, locate

FORMATS = ("md", "html", "json")


def render(report: RunReport, fmt: str, *, max_chars: int | None = None) -> str:
    """The report in ``fmt``: ``md`` (bounded by ``max_chars``), ``html`` or ``json``."""
    if fmt == "md":
        return render_markdown(report, max_chars or DEFAULT_MAX_CHARS)
    if fmt == "html":
        return render_html(report)
    if fmt == "json":
        return json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n"
    raise UsageError(f"unknown report format {fmt!r}: use one of {', '.join(FORMATS)}")


def report_for(workdir: Path, run_id: str) -> RunReport:
    """The report of ``run_id`` in the repository at ``workdir``."""
    return build_report(locate(workdir, run_id))


__all__ = ["FORMATS", "RunReport", "build_report", "locate", "render", "report_for"]
