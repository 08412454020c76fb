"""One normalised observation shape for every parser, and the parser protocol.

An observation is what a check found, turned into facts a condition can test
(``tests.failed``, ``cov.percent``) and into compact feedback for the next act step.
The shape is specified in ``schemas/observation.schema.json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

from looprun.data.freeze import thaw
from looprun.data.value import valueclass

_EMPTY: Mapping[str, Any] = MappingProxyType({})

# Facts every observation has; parsers add their own (declared in Parser.facts).
COMMON_FACTS: frozenset[str] = frozenset(
    {"ok", "exit_code", "counts", "items", "signature", "feedback", "error", "ran", "parser"}
)


@valueclass
class Item:
    """One finding: a failing test, a lint result, an uncovered file, a policy breach."""

    id: str  # test id, or rule id for analysers
    message: str
    severity: str = "error"  # error | failure | warning | note
    file: str | None = None
    line: int | None = None
    col: int | None = None
    rule: str | None = None
    detail: str = ""  # a few key lines (traceback tail, snippet), already bounded


@valueclass
class Observation:
    """One observer's parsed result: the facts conditions read and the feedback the model gets."""

    parser: str
    ok: bool
    exit_code: int | None = None
    counts: Mapping[str, int | float] = field(default_factory=lambda: _EMPTY)
    items: tuple[Item, ...] = ()
    signature: str = ""
    feedback: str = ""
    facts: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)  # parser-specific
    error: str | None = None  # why the observation could not be made, if it could not
    ran: bool = True  # False when the observer's `when` condition skipped it

    def to_facts(self) -> dict[str, Any]:
        """Plain data for expressions: counts and parser facts also appear at top level."""
        out: dict[str, Any] = {}
        out.update(thaw(self.counts))
        out.update(thaw(self.facts))
        out.update(
            {
                "parser": self.parser,
                "ok": self.ok,
                "ran": self.ran,
                "exit_code": self.exit_code,
                "counts": thaw(self.counts),
                "items": [{k: v for k, v in item.__dict__.items()} for item in self.items],
                "signature": self.signature,
                "feedback": self.feedback,
                "error": self.error,
            }
        )
        return out


@valueclass
class ParseInput:
    """Everything a parser may look at."""

    workdir: Path
    file: Path | None = None  # the report file, if the observer names one
    output: str | None = None  # the command's capped output, if a command ran
    exit_code: int | None = None
    timed_out: bool = False
    options: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    base: str | None = None  # git_diff: the tree-ish to diff against (the run's base)
    git_dir: Path | None = None  # git_diff: a private git dir when the workdir has none
    exclude: tuple[str, ...] = ()  # git_diff: paths never part of the diff (report files)
    outcomes: Any = None  # junit: what the pytest outcome channel said (outcome_channel.Outcomes)
    git_output: Any = None  # git_diff: what git said (git_diff.GitOutput), asked by checks/


class Parser(Protocol):
    """Turns a check's output into an Observation. Must not raise on bad input."""

    name: str
    facts: frozenset[str]  # fact names beyond COMMON_FACTS, for load-time name checks

    def parse(self, data: ParseInput) -> Observation: ...
