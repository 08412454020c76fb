"""The policy's rules on the real diff, judged one file's part at a time and remembered.

A run's diff against its base grows with every file the run changes, and the policy
reads it after every act turn: read whole, each turn costs more than the last. A file's
part of the diff decides on its own the paths it changes, its line counts and the
forbidden patterns it adds, so each part is judged once and its verdict kept while the
part's text is the same; a turn judges only the parts that differ from the last turn's.
The verdict on the whole diff is put together from the parts exactly as if it had been
read whole: the line limit on the sums, at most ``MAX_PATTERN_HITS`` hits in diff order.

Nothing is assumed about who changed a file: a part is its text in the real diff, so a
file a command wrote is judged as soon as its part appears or changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from looprun.act import diffcheck
from looprun.act.diffrules import (
    MAX_PATTERN_HITS,
    PatternRule,
    Violation,
    pattern_violations,
    scoped_rules,
)
from looprun.template.model import ScopedPattern


@dataclass(frozen=True)
class PartReview:
    """What one file's part of the diff shows the policy."""

    denied: tuple[str, ...]  # paths it changes that the path rules refuse
    files: tuple[str, ...]  # paths with changed lines
    added: int
    removed: int
    forbidden: tuple[Violation, ...]  # the template's forbidden patterns in its added lines
    scoped: tuple[Violation, ...]  # the scoped patterns in its added lines


@dataclass(frozen=True)
class DiffReview:
    """The parts' verdicts, in diff order."""

    parts: tuple[PartReview, ...]

    def denied(self) -> list[str]:
        return list(dict.fromkeys(p for r in self.parts for p in r.denied))

    def stats(self) -> diffcheck.DiffStats:
        files = dict.fromkeys(f for r in self.parts for f in r.files)
        added = sum(r.added for r in self.parts)
        removed = sum(r.removed for r in self.parts)
        return diffcheck.DiffStats(tuple(files), added, removed)

    def forbidden(self) -> list[Violation]:
        return [v for r in self.parts for v in r.forbidden][:MAX_PATTERN_HITS]

    def scoped(self) -> list[Violation]:
        return [v for r in self.parts for v in r.scoped][:MAX_PATTERN_HITS]


class Reviewer:
    """Judges diffs part by part, keeping the verdicts of the parts seen last time."""

    def __init__(self, denied: Callable[[str], bool], forbidden: Sequence[PatternRule]):
        self._denied = denied  # whether the path rules refuse a changed path
        self._forbidden = list(forbidden)
        self._scoped_from: tuple[ScopedPattern, ...] = ()
        self._scoped: list[PatternRule] = []
        self._known: dict[str, PartReview] = {}

    def review(self, parts: Sequence[str], scoped: Sequence[ScopedPattern]) -> DiffReview:
        """The verdict on the diff ``parts`` (one file's part each, in diff order), with
        the template's forbidden patterns and the ``scoped`` ones."""
        if tuple(scoped) != self._scoped_from:  # other rules: no verdict holds
            self._scoped_from, self._scoped = tuple(scoped), scoped_rules(scoped)
            self._known = {}
        if any(not p.endswith("\n") for p in parts[:-1]):
            parts = ["".join(parts)]  # a line would run across parts: judge the text whole
        known, self._known = self._known, {}
        out = []
        for part in parts:
            found = known.get(part)
            if found is None:
                found = self._judge(part)
            self._known[part] = found
            out.append(found)
        return DiffReview(tuple(out))

    def _judge(self, part: str) -> PartReview:
        stats = diffcheck.stats(part)
        return PartReview(
            denied=tuple(p for p in diffcheck.changed_paths(part) if self._denied(p)),
            files=stats.files,
            added=stats.added,
            removed=stats.removed,
            forbidden=tuple(pattern_violations(part, self._forbidden)),
            scoped=tuple(pattern_violations(part, self._scoped)),
        )
