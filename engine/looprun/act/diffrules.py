"""Rules judged on the real change, after the fact: protected paths and doctests, and
forbidden patterns in the lines a diff adds (all of them, or scoped to some files).

Each breach is a ``Violation``, as journaled and shown to refine rules.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

import pathspec

from looprun.act import diffcheck
from looprun.data.changes import DOCTEST_SUFFIXES, FileChange, lost_examples
from looprun.data.patchtext import shown, source_lines
from looprun.data.value import valueclass
from looprun.template.model import ScopedPattern

MAX_PATTERN_HITS = 20


@valueclass
class Violation:
    """One refusal or breach, as journaled and shown to refine rules."""

    rule: str  # e.g. path.outside, command.shell_syntax, diff.too_large
    message: str
    tool: str
    detail: str = ""


def glob_spec(globs: Iterable[str]) -> pathspec.PathSpec:
    """Gitignore-style globs (``**`` understood) as one matcher."""
    return pathspec.GitIgnoreSpec.from_lines(list(globs))


def check_scoped_patterns(diff_text: str, rules: Sequence[ScopedPattern]) -> list[Violation]:
    """Forbidden patterns in the lines the real diff adds to the files each rule covers:
    those its ``paths`` match (every file when it has none) and its ``exclude`` does not."""
    if not rules:
        return []
    return pattern_violations(diff_text, scoped_rules(rules))


def scoped_rules(rules: Sequence[ScopedPattern]) -> list[PatternRule]:
    """``rules`` as :func:`pattern_violations` reads them, their globs compiled."""
    scoped = [
        (rule, glob_spec(rule.paths or ("**",)), glob_spec(rule.exclude) if rule.exclude else None)
        for rule in rules
    ]

    def covers(paths: pathspec.PathSpec, exclude: pathspec.PathSpec | None) -> _Covers:
        return lambda path: paths.match_file(path) and not (exclude and exclude.match_file(path))

    return [(r.pattern, r.regex, covers(paths, exclude), r.message) for r, paths, exclude in scoped]


_Covers = Callable[[str], bool]
# (pattern as written, its regex, which files it covers (None: all), why it is forbidden)
PatternRule = tuple[str, re.Pattern[str], _Covers | None, str]


def pattern_violations(diff_text: str, rules: Sequence[PatternRule]) -> list[Violation]:
    """One violation per added line a rule's pattern matches (the whole line or a piece of
    it as Python splits it at a lone CR), in the files the rule covers (``None``: every
    file), at most ``MAX_PATTERN_HITS`` of them."""
    found: list[Violation] = []
    hits = 0
    for added in diffcheck.added_lines(diff_text):
        pieces = source_lines(added.text)
        for pattern, regex, covers, message in rules:
            if covers is not None and not covers(added.path):
                continue
            if any(regex.search(piece) for piece in pieces):
                hits += 1
                if hits <= MAX_PATTERN_HITS:
                    why = f": {message}" if message else ""
                    text = shown(added.text.strip())[:200]
                    found.append(
                        Violation(
                            "pattern.forbidden",
                            f"forbidden pattern {pattern!r} added at "
                            f"{added.path}:{added.line}{why}",
                            "diff",
                            detail=f"{added.path}:{added.line}: {text}",
                        )
                    )
    return found


def check_protected(
    changes: Iterable[FileChange],
    globs: Iterable[str],
    doctests: bool,
    scope: str,
    allow_new: Iterable[str] = (),
) -> list[Violation]:
    """Changes to protected paths, and (with ``doctests``) doctest examples changed or
    removed in any changed file; ``scope`` says since when ("in task fix"). A file
    created at an ``allow_new`` path is no violation: a task that may only add files."""
    spec = glob_spec(globs)
    new_ok = glob_spec(allow_new)
    found: list[Violation] = []
    verbs = {"A": "created", "D": "deleted"}
    for ch in changes:
        if spec.match_file(ch.path) and not (ch.status == "A" and new_ok.match_file(ch.path)):
            found.append(
                Violation(
                    "path.protected",
                    f"{ch.path} is protected {scope} and may not be "
                    f"{verbs.get(ch.status, 'changed')}",
                    "diff",
                    detail=ch.path,
                )
            )
            continue
        if not doctests or ch.old is None or not ch.path.endswith(DOCTEST_SUFFIXES):
            continue
        for source, want in lost_examples(ch.old, ch.new)[:MAX_PATTERN_HITS]:
            shown = source.splitlines()[0][:120] if source else ""
            expect = f" (expected output {want[:80]!r})" if want else ""
            found.append(
                Violation(
                    "doctest.protected",
                    f"{ch.path}: the doctest example >>> {shown}{expect} was changed or "
                    f"removed; existing doctests are protected {scope}",
                    "diff",
                    detail=ch.path,
                )
            )
    return found
