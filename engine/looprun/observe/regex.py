"""Line-oriented diagnostics (``file:line:col: message``) from any tool, with presets.

Option ``pattern``: a Python regex with named groups ``file``, ``line``, ``col``,
``message``, and optionally ``severity``, ``rule``. Option ``preset``: one of
``PRESETS`` (mypy, pyright, tsc, eslint, eslint-stylish, eslint-compact, gcc, clang,
rustc, go-vet, pytest). The text is the report ``file`` when one is given, else the
command output, with terminal colour codes removed.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Iterator
from dataclasses import replace

from looprun.data.freeze import freeze
from looprun.observe import declared_facts
from looprun.observe.base import Item, Observation, ParseInput
from looprun.observe.feedback import clip, render, strip_ansi, tail
from looprun.observe.normalise import failure_signature
from looprun.observe.pytest_text import PytestText
from looprun.observe.reports import (
    ReportProblem,
    locate_report,
    max_feedback,
    open_report,
    option,
    signature_of,
    unusable,
)
from looprun.observe.traceback import project_path

NAME = "regex"
EMPTY_FACTS = declared_facts.REGEX
FACTS = frozenset(EMPTY_FACTS)

_LOC = r"(?P<file>[^\s:(][^:(\n]*?):(?P<line>\d+)"
_GCC = (
    rf"^{_LOC}:(?P<col>\d+): (?P<severity>fatal error|error|warning|note): "
    r"(?P<message>.*?)(?: \[(?P<rule>-W[\w=+-]+)\])?$"
)
# ESLint's default ("stylish") format: a file name line, then indented findings.
_STYLISH = (
    r"^\s+(?P<line>\d+):(?P<col>\d+)\s+(?P<severity>error|warning)\s+(?P<message>.*?)"
    r"(?:\s{2,}(?P<rule>[\w/@.-]+))?\s*$"
)
PRESETS: dict[str, tuple[str, ...]] = {
    "mypy": (
        # --show-column-numbers adds :col, --show-error-end adds :end_line:end_col
        rf"^{_LOC}(?::(?P<col>\d+)(?::\d+:\d+)?)?: (?P<severity>error|warning|note): "
        r"(?P<message>.*?)(?:  \[(?P<rule>[\w-]+)\])?$",
    ),
    "pyright": (
        r"^\s*(?P<file>.+?):(?P<line>\d+):(?P<col>\d+) - (?P<severity>error|warning|information): "
        r"(?P<message>.*?)(?: \((?P<rule>report\w+)\))?$",
    ),
    "tsc": (
        r"^(?P<file>[^\s(][^(\n]*?)\((?P<line>\d+),(?P<col>\d+)\): (?P<severity>error|warning) "
        r"(?P<rule>TS\d+): (?P<message>.*)$",
        rf"^{_LOC}:(?P<col>\d+) - (?P<severity>error|warning) (?P<rule>TS\d+): (?P<message>.*)$",
    ),
    "eslint": (
        rf"^{_LOC}:(?P<col>\d+): (?P<message>.*?) "
        r"\[(?P<severity>Error|Warning)(?:/(?P<rule>[^\]]+))?\]$",
        r"^(?P<file>.+?): line (?P<line>\d+), col (?P<col>\d+), (?P<severity>Error|Warning) - "
        r"(?P<message>.*?)(?: \((?P<rule>[\w/@-]+)\))?$",
        _STYLISH,
    ),
    "eslint-stylish": (_STYLISH,),
    "eslint-compact": (
        r"^(?P<file>.+?): line (?P<line>\d+), col (?P<col>\d+), (?P<severity>Error|Warning) - "
        r"(?P<message>.*?)(?: \((?P<rule>[\w/@-]+)\))?$",
    ),
    "gcc": (_GCC,),
    "clang": (_GCC,),
    "rustc": (
        rf"^{_LOC}:(?P<col>\d+): (?P<severity>error|warning|note)(?:\[(?P<rule>E\d+)\])?: "
        r"(?P<message>.*)$",
    ),
    "go-vet": (
        r"^(?:vet: )?(?P<file>[^\s:][^:\n]*\.go):(?P<line>\d+):(?P<col>\d+): (?P<message>.*)$",
    ),
    "pytest": (),  # handled by pytest_text
}
_SEVERITY = {
    "fatal error": "error",
    "error": "error",
    "warning": "warning",
    "note": "note",
    "information": "note",
    "info": "note",
    "hint": "note",
}
_RANK = {"error": 3, "warning": 2, "note": 1}
# A line naming the file that the following findings (without a file group) belong to.
_FILE_HEADER = {
    "eslint": re.compile(r"^(?P<file>[^\s✖].*?)\s*$"),
    "eslint-stylish": re.compile(r"^(?P<file>[^\s✖].*?)\s*$"),
}
# mypy --pretty wraps long messages: the rest (and the error code) follow on the next lines.
# With a narrow terminal the error code itself may wrap onto a line of its own.
_CONTINUATION = {
    "mypy": re.compile(
        r"^(?P<message>(?:[^\s\[].*?)?)\s*(?:(?:^|(?<=\s))\[(?P<rule>[a-z][a-z0-9-]*)\])?\s*$"
    )
}
_NOT_CONTINUATION = re.compile(r"^(?:Found \d+ errors?|Success:|\S+: (?:note|error|warning):)")
_MAX_ITEMS = 2000


def _lines(data: ParseInput) -> tuple[Iterator[str], str]:
    """The text to scan, line by line, and what to call it in messages."""
    if data.file is not None:
        path, shown = locate_report(data)

        def read() -> Iterator[str]:
            try:
                with io.TextIOWrapper(
                    open_report(path, shown), encoding="utf-8", errors="replace"
                ) as fh:
                    for line in fh:
                        yield strip_ansi(line)
            except OSError as exc:
                raise ReportProblem(f"{shown}: cannot read: {exc.strerror or exc}") from None

        return read(), shown
    if data.output is None:
        raise ReportProblem("nothing to read: give a report `file` or a command to `run`")
    return (strip_ansi(ln) for ln in data.output.splitlines()), "the command output"


def _compile(data: ParseInput) -> tuple[str, list[re.Pattern[str]]]:
    preset = option(data, "preset")
    pattern = option(data, "pattern")
    if preset is not None and pattern is not None:
        raise ReportProblem("give either option `preset` or option `pattern`, not both")
    if pattern is not None:
        try:
            rx = re.compile(str(pattern))
        except re.error as exc:
            raise ReportProblem(f"option `pattern` is not a valid regex: {exc}") from None
        if "message" not in rx.groupindex:
            raise ReportProblem("option `pattern` needs a named group (?P<message>...)")
        return "pattern", [rx]
    if preset is None:
        raise ReportProblem(f"option `preset` ({', '.join(PRESETS)}) or `pattern` is required")
    if preset not in PRESETS:
        raise ReportProblem(f"unknown preset {preset!r}; known: {', '.join(PRESETS)}")
    return str(preset), [re.compile(p) for p in PRESETS[preset]]


def _group(m: re.Match[str], name: str) -> str | None:
    return m.groupdict().get(name)


def _scan(
    lines: Iterable[str], patterns: list[re.Pattern[str]], workdir: str, preset: str = "pattern"
) -> tuple[list[Item], dict[str, int]]:
    items: list[Item] = []
    counts = {"errors": 0, "warnings": 0, "notes": 0}
    header = _FILE_HEADER.get(preset)
    continuation = _CONTINUATION.get(preset)
    current_file: str | None = None
    open_item = False  # the last line was a finding whose message may continue
    for raw in lines:
        line = raw.rstrip("\r\n")
        matched = False
        for rx in patterns:
            m = rx.search(line)
            if not m:
                continue
            matched = True
            sev = _SEVERITY.get((_group(m, "severity") or "error").lower(), "error")
            counts[{"error": "errors", "warning": "warnings", "note": "notes"}[sev]] += 1
            open_item = False
            if len(items) < _MAX_ITEMS:
                file = _group(m, "file") or ("file" not in m.groupdict() and current_file) or None
                if file:
                    file = project_path(file, workdir) or file.strip()
                ln, col = _group(m, "line"), _group(m, "col")
                rule = _group(m, "rule")
                items.append(
                    Item(
                        id=rule or file or "line",
                        rule=rule,
                        severity=sev,
                        message=clip((_group(m, "message") or line).strip(), 300),
                        file=file,
                        line=int(ln) if ln and ln.isdigit() else None,
                        col=int(col) if col and col.isdigit() else None,
                    )
                )
                open_item = continuation is not None and rule is None
            break
        if matched:
            continue
        if open_item and continuation is not None and not _NOT_CONTINUATION.match(line):
            c = continuation.match(line)
            if c:
                last = items[-1]
                rule = c["rule"]
                more = c["message"].strip()
                items[-1] = replace(
                    last,
                    message=clip(f"{last.message} {more}" if more else last.message, 300),
                    rule=rule,
                    id=rule or last.id,
                )
                open_item = rule is None
                continue
        open_item = False
        if header is not None:
            h = header.match(line)
            if h and not line.startswith(("✖", "✔")):
                current_file = project_path(h["file"], workdir) or h["file"].strip()
    return items, counts


class RegexParser:
    """Diagnostics matched line by line by a preset or a custom pattern."""

    name = NAME
    facts = FACTS
    empty_facts = EMPTY_FACTS

    def parse(self, data: ParseInput) -> Observation:
        try:
            preset, patterns = _compile(data)
            lines, shown = _lines(data)
            if preset == "pytest":
                text = PytestText(workdir=str(data.workdir))
                text.feed(lines)
                return _pytest_observation(data, text, shown)
            items, counts = _scan(lines, patterns, str(data.workdir), preset)
        except ReportProblem as exc:
            return unusable(NAME, data, str(exc), EMPTY_FACTS)
        return findings_observation(data, preset, items, counts, shown)


def _exit_note(data: ParseInput, shown: str, found: bool) -> str:
    if data.exit_code in (None, 0) or found:
        return ""
    note = f"the command exited {data.exit_code} but no line of {shown} matched"
    if data.output:
        note += "\n" + tail(data.output, max_feedback(data) // 2)
    return note


def findings_observation(
    data: ParseInput,
    preset: str,
    items: list[Item],
    counts: dict[str, int],
    shown: str,
    *,
    parser: str = NAME,
    extra_facts: dict[str, int] | None = None,
) -> Observation:
    """Diagnostics (errors, warnings, notes) as an observation: ok when nothing is at or
    above ``fail_on`` and the command exited 0."""
    counts = {**counts, "total": sum(counts.values())}
    threshold = _RANK.get(str(option(data, "fail_on", "error")), 3)
    failing = [i for i in items if _RANK[i.severity] >= threshold]
    bad = sum(n for k, n in counts.items() if k != "total" and _RANK[k[:-1]] >= threshold)
    ok = bad == 0 and data.exit_code in (None, 0)
    header = (
        f"{preset}: {counts['errors']} errors, {counts['warnings']} warnings, "
        f"{counts['notes']} notes"
    )
    note = _exit_note(data, shown, bool(items))
    return Observation(
        parser=parser,
        ok=ok,
        exit_code=data.exit_code,
        counts=freeze(counts),
        items=tuple(items),
        signature=failure_signature(
            [(f"{i.id} {i.file or ''}", i.message) for i in failing]
            or ([(f"exit {data.exit_code}", "")] if not ok else [])
        ),
        feedback=render(header, items, max_bytes=max_feedback(data), footer=note, noun="more"),
        facts=freeze({**declared_facts.REGEX_DIAGNOSTICS, **counts, **(extra_facts or {})}),
    )


def _pytest_observation(data: ParseInput, text: PytestText, shown: str) -> Observation:
    items = text.items()
    counts = text.counts(items)
    ran = counts["tests"] - counts["skipped"]
    bad = counts["failed"] + counts["errors"]
    ok = bad == 0 and ran > 0 and data.exit_code in (None, 0)
    summary = ", ".join(
        f"{v} {k}" for k, v in counts.items() if k != "tests" and (v or k == "passed")
    )
    header = f"tests: {summary} ({counts['tests']} tests)"
    notes = []
    if ran == 0 and bad == 0:
        notes.append(f"no tests ran according to {shown}")
    if bad == 0 and not items:
        extra = _exit_note(data, shown, False)
        if extra:
            notes.append(extra)
    failing = list(dict.fromkeys(i.id for i in items))
    facts = {
        **counts,
        "failing": failing,
        "total": bad,
        "warnings": text.tally.get("warnings", 0),
        "notes": 0,
    }
    return Observation(
        parser=NAME,
        ok=ok,
        exit_code=data.exit_code,
        counts=freeze(counts),
        items=tuple(items),
        signature=signature_of(items, None if ok or items else "; ".join(notes)[:200]),
        feedback=render(
            header,
            items,
            max_bytes=max_feedback(data),
            footer="\n".join(notes),
            noun="more failing",
            group=True,
        ),
        facts=freeze(facts),
    )
