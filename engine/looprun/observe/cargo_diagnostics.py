"""Diagnostics from cargo's JSON messages (``cargo clippy|check --message-format=json``).

Cargo writes one JSON object per line on stdout; those with ``reason: compiler-message``
carry rustc's own diagnostic (level, code, message, spans with 1-based lines and columns),
so nothing is guessed from wrapped or coloured text. A diagnostic without a span
("aborting due to 2 previous errors", "3 warnings emitted") is a summary, not a finding;
one that two targets share (a lib and its test build compile the same file) counts once.
Facts are the ``diagnostics`` parser's: ``errors``, ``warnings``, ``notes``, ``total``,
``files``. A command that exits non-zero with no error found is not ok.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from looprun.observe import declared_facts
from looprun.observe.base import Item, Observation, ParseInput
from looprun.observe.feedback import clip
from looprun.observe.regex import findings_observation
from looprun.observe.reports import ReportProblem, locate_report, read_text, unusable
from looprun.observe.traceback import project_path

NAME = "cargo_diagnostics"
EMPTY_FACTS = declared_facts.DIAGNOSTICS
FACTS = frozenset(EMPTY_FACTS)
_SEVERITY = {
    "error": "error",
    "error: internal compiler error": "error",
    "warning": "warning",
    "note": "note",
    "help": "note",
}


def _primary(message: dict[str, Any]) -> dict[str, Any] | None:
    spans = [s for s in message.get("spans") or () if isinstance(s, dict)]
    return next((s for s in spans if s.get("is_primary")), spans[0] if spans else None)


def _items(lines: Iterable[str], workdir: str) -> Iterator[Item]:
    seen: set[tuple[Any, ...]] = set()
    for raw in lines:
        if not raw.startswith("{"):
            continue  # cargo's own text, when a command mixes it in
        try:
            doc = json.loads(raw)
        except json.JSONDecodeError:
            continue
        if not isinstance(doc, dict) or doc.get("reason") != "compiler-message":
            continue
        message = doc.get("message")
        if not isinstance(message, dict):
            continue
        span = _primary(message)
        level = str(message.get("level") or "")
        if span is None or level not in _SEVERITY:
            continue
        code = message.get("code")
        rule = str(code.get("code")) if isinstance(code, dict) and code.get("code") else None
        file = project_path(str(span.get("file_name") or ""), workdir)
        line, col = span.get("line_start"), span.get("column_start")
        text = " ".join(str(message.get("message") or "").split())
        key = (level, rule, file, line, col, text)
        if key in seen:
            continue
        seen.add(key)
        yield Item(
            id=rule or file or "diagnostic",
            rule=rule,
            severity=_SEVERITY[level],
            message=clip(text, 300),
            file=file,
            line=line if isinstance(line, int) and line > 0 else None,
            col=col if isinstance(col, int) and col > 0 else None,
        )


class CargoDiagnosticsParser:
    """rustc and clippy findings from cargo's JSON messages."""

    name = NAME
    facts = FACTS
    empty_facts = EMPTY_FACTS

    def parse(self, data: ParseInput) -> Observation:
        try:
            if data.file is not None:
                path, shown = locate_report(data)
                text = read_text(path, shown)
            elif data.output is not None:
                text, shown = data.output, "the command output"
            else:
                raise ReportProblem("nothing to read: give a report `file` or a command to `run`")
        except ReportProblem as exc:
            return unusable(NAME, data, str(exc), EMPTY_FACTS)
        items = list(_items(text.splitlines(), str(data.workdir)))
        counts = {"errors": 0, "warnings": 0, "notes": 0}
        for item in items:
            counts[item.severity + "s"] += 1
        files = len({i.file for i in items if i.file})
        return findings_observation(
            data, "cargo", items, counts, shown, parser=NAME, extra_facts={"files": files}
        )
