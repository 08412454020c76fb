"""Diagnostics from a tool's own JSON output, where it has one: nothing to guess from
wrapped or coloured text.

Option ``format``: ``mypy`` (``mypy -O json``: one JSON object per line), ``pyright``
(``pyright --outputjson``) or ``eslint`` (``eslint -f json``). The text is the report
``file`` when one is given, else the command output. Facts: ``errors``, ``warnings``,
``notes``, ``total`` (and ``files``: how many files have a finding). A command that exits
non-zero with no finding (a crash, a bad config) is not ok; its output is the feedback.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from looprun.observe import declared_facts
from looprun.observe.base import Item, Observation, ParseInput
from looprun.observe.feedback import clip
from looprun.observe.regex import findings_observation
from looprun.observe.reports import (
    ReportProblem,
    locate_report,
    option,
    parse_json,
    read_text,
    unusable,
)
from looprun.observe.traceback import project_path

NAME = "diagnostics"
EMPTY_FACTS = declared_facts.DIAGNOSTICS
FACTS = frozenset(EMPTY_FACTS)
FORMATS = declared_facts.DIAGNOSTIC_FORMATS
_SEVERITY = {"error": "error", "warning": "warning", "note": "note", "information": "note"}


def _item(workdir: str, file: Any, line: Any, col: Any, sev: str, message: Any, rule: Any) -> Item:
    path = project_path(str(file), workdir) or str(file) if file else None
    code = str(rule) if rule else None
    return Item(
        id=code or path or "diagnostic",
        rule=code,
        severity=_SEVERITY.get(sev, "error"),
        message=clip(" ".join(str(message or "").split()), 300),
        file=path,
        line=int(line) if isinstance(line, int) and line > 0 else None,
        col=int(col) if isinstance(col, int) and col > 0 else None,
    )


def _mypy(text: str, shown: str, workdir: str) -> Iterator[Item]:
    """``mypy -O json``: one object per line (file, line, column 0-based, message, hint,
    code, severity)."""
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        if not raw.lstrip().startswith("{"):  # e.g. "Success: no issues found"
            continue
        try:
            d = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ReportProblem(f"{shown}:{n}: not a mypy JSON line ({exc.msg})") from None
        message = d.get("message", "")
        if d.get("hint"):
            message = f"{message} ({d['hint']})"
        col = d.get("column")
        yield _item(
            workdir,
            d.get("file"),
            d.get("line"),
            col + 1 if isinstance(col, int) and col >= 0 else None,
            str(d.get("severity", "error")),
            message,
            d.get("code"),
        )


def _pyright(text: str, shown: str, workdir: str) -> Iterator[Item]:
    """``pyright --outputjson``: generalDiagnostics with 0-based ranges."""
    doc = parse_json(text, shown)
    if not isinstance(doc, dict) or not isinstance(doc.get("generalDiagnostics"), list):
        raise ReportProblem(f"{shown}: no `generalDiagnostics` list: not pyright --outputjson")
    for d in doc["generalDiagnostics"]:
        start = (d.get("range") or {}).get("start") or {}
        line, col = start.get("line"), start.get("character")
        yield _item(
            workdir,
            d.get("file"),
            line + 1 if isinstance(line, int) else None,
            col + 1 if isinstance(col, int) else None,
            str(d.get("severity", "error")),
            d.get("message"),
            d.get("rule"),
        )


def _eslint(text: str, shown: str, workdir: str) -> Iterator[Item]:
    """``eslint -f json``: a list of files, each with messages (severity 2 error, 1 warning)."""
    doc = parse_json(text, shown)
    if not isinstance(doc, list):
        raise ReportProblem(f"{shown}: expected a list of files: not eslint -f json")
    for result in doc:
        for m in result.get("messages") or ():
            sev = "error" if m.get("severity") == 2 or m.get("fatal") else "warning"
            yield _item(
                workdir,
                result.get("filePath"),
                m.get("line"),
                m.get("column"),
                sev,
                m.get("message"),
                m.get("ruleId"),
            )


_READERS: dict[str, Callable[[str, str, str], Iterator[Item]]] = {
    "mypy": _mypy,
    "pyright": _pyright,
    "eslint": _eslint,
}


class DiagnosticsParser:
    """Findings from mypy, pyright or eslint JSON output."""

    name = NAME
    facts = FACTS
    empty_facts = EMPTY_FACTS

    def parse(self, data: ParseInput) -> Observation:
        fmt = option(data, "format")
        try:
            if fmt not in _READERS:
                raise ReportProblem(f"option `format` must be one of {', '.join(FORMATS)}")
            if data.file is not None:
                path, shown = locate_report(data)
                text = read_text(path, shown)
            elif data.output is not None:
                text, shown = data.output, "the command output"
            else:
                raise ReportProblem("nothing to read: give a report `file` or a command to `run`")
            items = list(_READERS[fmt](text, shown, str(data.workdir)))
        except ReportProblem as exc:
            return unusable(NAME, data, str(exc), EMPTY_FACTS)
        return _observation(data, str(fmt), items, shown)


def _observation(data: ParseInput, fmt: str, items: list[Item], shown: str) -> Observation:
    counts = {"errors": 0, "warnings": 0, "notes": 0}
    for item in items:
        counts[item.severity + "s"] += 1
    files = len({i.file for i in items if i.file})
    return findings_observation(
        data, fmt, items, counts, shown, parser=NAME, extra_facts={"files": files}
    )
