"""pytest's plain text output, for when no JUnit report exists (the ``pytest`` regex preset).

Reads, line by line and in bounded memory, the failure sections (``____ test_x ____``
with their ``>``/``E`` lines and frames), the short test summary (``FAILED id - msg``)
and the final tally (``2 failed, 3 passed in 0.12s``). A 10 MB log costs a few KB.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from looprun.observe.base import Item
from looprun.observe.feedback import clip
from looprun.observe.traceback import crash, innermost

_SECTION = re.compile(r"^_{3,} (?P<title>.+?) _{3,}\s*$")
_BANNER = re.compile(r"^={3,} ?(?P<title>.*?) ?={3,}\s*$")
_SUMMARY = re.compile(r"^(?P<kind>FAILED|ERROR) (?P<id>.+?)(?: - (?P<msg>.*))?\s*$")
_TALLY = re.compile(r"(\d+) (failed|passed|skipped|errors?|xfailed|xpassed|deselected|warnings?)\b")
_FINAL = re.compile(r"^=*\s*(?:\d+ \w+(?:, )?)+.* in [\d.]+s")
_E_LINE = re.compile(r"^E\s+\S")
_FRAME = re.compile(r"^[^\s:<>][^:\n]*?\.[A-Za-z]\w{0,5}:\d+: ")
_MAX_SECTIONS = 2000
_MAX_E = 6
_MAX_FRAMES = 12


@dataclass
class _Section:
    title: str
    source: str = ""
    errors: list[str] = field(default_factory=list)
    frames: list[str] = field(default_factory=list)


@dataclass
class PytestText:
    """Accumulates what a pytest log says; feed it lines, then read ``items()``."""

    workdir: str | None = None
    sections: dict[str, _Section] = field(default_factory=dict)
    summary: list[tuple[str, str, str]] = field(default_factory=list)  # kind, id, message
    tally: dict[str, int] = field(default_factory=dict)
    _current: _Section | None = None
    # a faulthandler dump (from "Fatal Python error" on), else the last lines: a crash
    _crash: list[str] = field(default_factory=list)
    _last: deque[str] = field(default_factory=lambda: deque(maxlen=20))

    def feed(self, lines: Iterable[str]) -> None:
        for raw in lines:
            line = raw.rstrip("\r\n")
            self._last.append(line)
            if (self._crash or "Fatal Python error:" in line) and len(self._crash) < 200:
                self._crash.append(line)
            m = _SECTION.match(line)
            if m:
                title = m["title"]
                if title.startswith("Captured ") or len(self.sections) >= _MAX_SECTIONS:
                    self._current = None
                else:
                    self._current = self.sections.setdefault(title, _Section(title))
                continue
            if _BANNER.match(line):
                self._current = None
                if _FINAL.match(line):
                    self._read_tally(line)
                continue
            m = _SUMMARY.match(line)
            if m and self._current is None:
                self.summary.append((m["kind"], m["id"].strip(), (m["msg"] or "").strip()))
                continue
            if _FINAL.match(line) and self._current is None:
                self._read_tally(line)
                continue
            sec = self._current
            if sec is None:
                continue
            if line.startswith(">"):
                sec.source = clip(line.strip(), 200)
            elif _E_LINE.match(line):
                if len(sec.errors) < _MAX_E:
                    sec.errors.append(clip(line.rstrip(), 200))
            elif _FRAME.match(line):
                sec.frames.append(clip(line.strip(), 200))
                del sec.frames[:-_MAX_FRAMES]

    def _read_tally(self, line: str) -> None:
        tally: dict[str, int] = {}
        for n, word in _TALLY.findall(line):
            key = {"error": "errors", "warning": "warnings"}.get(word, word)
            tally[key] = tally.get(key, 0) + int(n)
        if tally:
            self.tally = tally

    def _section_for(self, kind: str, node_id: str) -> _Section | None:
        name = node_id.split("::", 1)[1].replace("::", ".") if "::" in node_id else node_id
        keys = (
            [name, f"ERROR at setup of {name}", f"ERROR at teardown of {name}"]
            if kind == "FAILED" or "::" in node_id
            else [f"ERROR collecting {node_id}", name]
        )
        for key in keys:
            if key in self.sections:
                return self.sections[key]
        return None

    def _item(self, node_id: str, severity: str, message: str, sec: _Section | None) -> Item:
        file = line = None
        detail = ""
        if sec is not None:
            frame = innermost("\n".join(sec.frames), self.workdir)
            if frame:
                file, line = frame.file, frame.line
            first_e = sec.errors[0][1:].strip() if sec.errors else ""
            if not message or (
                # the summary line cuts messages to the terminal width
                message.endswith("...") and first_e.startswith(message[:-3].rstrip())
            ):
                message = first_e or message
            detail = "\n".join(
                [*([sec.source] if sec.source else []), *sec.errors, *sec.frames[-1:]]
            )
        if file is None and "::" in node_id:
            file = node_id.split("::", 1)[0]
        return Item(
            id=node_id,
            message=clip(message, 300),
            severity=severity,
            file=file,
            line=line,
            detail=clip(detail, 800),
        )

    def crash(self) -> Item | None:
        """The interpreter crash the log ends with, as an item naming where it died."""
        found = crash("\n".join(self._crash or self._last), self.workdir)
        if found is None:
            return None
        return Item(id="crash", message=found.message, file=found.file, line=found.line)

    def items(self) -> list[Item]:
        out: list[Item] = []
        died = self.crash()
        if died is not None:
            out.append(died)
        if self.summary:
            seen: set[tuple[str, str]] = set()
            for kind, node_id, message in self.summary:
                if (kind, node_id) in seen:
                    continue
                seen.add((kind, node_id))
                severity = "failure" if kind == "FAILED" else "error"
                out.append(self._item(node_id, severity, message, self._section_for(kind, node_id)))
            return out
        for sec in self.sections.values():
            severity = "error" if sec.title.startswith("ERROR ") else "failure"
            out.append(self._item(sec.title, severity, "", sec))
        return out

    def counts(self, items: list[Item]) -> dict[str, Any]:
        failed = self.tally.get("failed", sum(1 for i in items if i.severity == "failure"))
        errors = self.tally.get("errors", sum(1 for i in items if i.severity == "error"))
        passed = self.tally.get("passed", 0)
        skipped = self.tally.get("skipped", 0)
        return {
            "tests": failed
            + errors
            + passed
            + skipped
            + self.tally.get("xfailed", 0)
            + self.tally.get("xpassed", 0),
            "passed": passed,
            "failed": failed,
            "errors": errors,
            "skipped": skipped,
        }
