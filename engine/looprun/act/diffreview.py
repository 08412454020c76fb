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

from looprun.act import diffcheck
from looprun.act.diffrules import (
    MAX_PATTERN_HITS,
    PatternRule,
    Violation,
    pattern_violations,
    scoped_rules,
)
from looprun.data.value import valueclass
from looprun.template.model import ScopedPattern


@valueclass
class PartReview:
    """What one file's part of the diff shows the policy."""

    denied: tuple[str, ...]  # paths it changes that the path rules refuse
    files: tuple[str, ...]  # paths with changed lines
    added: int
    removed: int
    forbidden: tuple[Violation, ...]  # the template's forbidden patterns in its added lines
    scoped: tuple[Violation, ...]  # the scoped patterns in its added lines
    ends_line: bool  # it ends with a newline, so no line runs on into the next part

    @property
    def flagged(self) -> bool:
        return bool(self.denied or self.forbidden or self.scoped)


@valueclass
class DiffReview:
    """The verdict on a whole diff, put together from its parts' in diff order."""

    denied: tuple[str, ...]
    files: int  # how many paths have changed lines
    added: int
    removed: int
    forbidden: tuple[Violation, ...]  # at most MAX_PATTERN_HITS
    scoped: tuple[Violation, ...]  # at most MAX_PATTERN_HITS

    @property
    def lines(self) -> int:
        return self.added + self.removed


class Reviewer:
    """Judges diffs part by part. The parts of the last diff are kept with their verdicts
    and running sums, so a review costs what changed since: the parts that came and went."""

    def __init__(self, denied: Callable[[str], bool], forbidden: Sequence[PatternRule]):
        self._denied = denied  # whether the path rules refuse a changed path
        self._forbidden = list(forbidden)
        self._scoped_from: tuple[ScopedPattern, ...] = ()
        self._scoped: list[PatternRule] = []
        self._reset()

    def _reset(self) -> None:
        self._known: dict[str, PartReview] = {}  # the last diff's parts
        self._files: dict[str, int] = {}  # path -> how many of them change its lines
        self._added = self._removed = 0
        self._flagged = 0  # parts with a finding
        self._open = 0  # parts that do not end with a newline

    def review(self, parts: Sequence[str], scoped: Sequence[ScopedPattern]) -> DiffReview:
        """The verdict on the diff ``parts`` (one file's part each, in diff order; joined,
        the diff), with the template's forbidden patterns and the ``scoped`` ones."""
        if tuple(scoped) != self._scoped_from:  # other rules: no verdict holds
            self._scoped_from, self._scoped = tuple(scoped), scoped_rules(scoped)
            self._reset()
        wanted = dict.fromkeys(parts)
        if len(wanted) != len(parts):  # a part twice (not git's per-path parts): count each
            self._reset()
            return self._whole([self._judge(p) for p in parts])
        known = self._known
        for part in known.keys() - wanted.keys():
            self._count(known.pop(part), -1)
        for part in wanted.keys() - known.keys():
            known[part] = self._judge(part)
            self._count(known[part], 1)
        if self._open > (0 if not parts or known[parts[-1]].ends_line else 1):
            # a line runs on from one part into the next: judge the text whole, as git's
            # reader would see it
            self._reset()
            return self._whole([self._judge("".join(parts))])
        if self._flagged:
            return self._whole([known[p] for p in parts])
        return DiffReview((), len(self._files), self._added, self._removed, (), ())

    def _count(self, part: PartReview, sign: int) -> None:
        self._added += sign * part.added
        self._removed += sign * part.removed
        self._flagged += sign * part.flagged
        self._open += sign * (not part.ends_line)
        for path in part.files:
            left = self._files.get(path, 0) + sign
            if left:
                self._files[path] = left
            else:
                del self._files[path]

    @staticmethod
    def _whole(parts: Sequence[PartReview]) -> DiffReview:
        return DiffReview(
            denied=tuple(dict.fromkeys(p for r in parts for p in r.denied)),
            files=len(dict.fromkeys(f for r in parts for f in r.files)),
            added=sum(r.added for r in parts),
            removed=sum(r.removed for r in parts),
            forbidden=tuple(v for r in parts for v in r.forbidden)[:MAX_PATTERN_HITS],
            scoped=tuple(v for r in parts for v in r.scoped)[:MAX_PATTERN_HITS],
        )

    def _judge(self, part: str) -> PartReview:
        stats = diffcheck.stats(part)
        return PartReview(
            denied=tuple(p for p in diffcheck.changed_paths(part) if self._denied(p)),
            files=stats.files,
            added=stats.added,
            removed=stats.removed,
            forbidden=tuple(pattern_violations(part, self._forbidden)),
            scoped=tuple(pattern_violations(part, self._scoped)),
            ends_line=part.endswith("\n"),
        )
