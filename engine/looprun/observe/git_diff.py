"""What changed in the working tree since the run's base: files, lines, policy breaches.

A pure function of git's output: the numstat, name-status and patch of the working tree
against the base, asked for by checks/ (``checks.git_diff``) and handed in as
``ParseInput.git_output``; this module never runs git.

Options: ``allow``/``deny`` (gitignore-style globs; a changed file not allowed, or
denied, is ``outside``), ``forbidden_patterns`` (substrings, or regexes written as
``re:PATTERN``, searched in *added* lines only) and ``max_lines`` (added + removed).
"""

from __future__ import annotations

import re
from typing import Any

from looprun.data.freeze import freeze
from looprun.data.globs import matching
from looprun.data.patchtext import shown, source_lines, walk
from looprun.data.value import valueclass
from looprun.observe import declared_facts
from looprun.observe.base import Item, Observation, ParseInput
from looprun.observe.feedback import clip, render
from looprun.observe.reports import as_list, max_feedback, option, signature_of, unusable

NAME = "git_diff"
EMPTY_FACTS = declared_facts.GIT_DIFF
FACTS = frozenset(EMPTY_FACTS)
_MAX_FORBIDDEN = 200

Matchers = list[tuple[str, re.Pattern[str] | None]]


@valueclass
class GitOutput:
    """What git said about the working tree against the base (all ``-z`` or ``-U0``)."""

    numstat: str = ""  # ``--numstat -z``
    status: str = ""  # ``--name-status -z``
    patch: str = ""  # ``-U0``, asked for only when there are forbidden patterns
    error: str | None = None  # why git could not say (not a repository, git failed)


def forbidden_matchers(data: ParseInput) -> Matchers:
    """The ``forbidden_patterns`` option compiled (raises ``re.error`` on a bad regex)."""
    out: Matchers = []
    for p in as_list(option(data, "forbidden_patterns")):
        out.append((p, re.compile(p[3:]) if p.startswith("re:") else None))
    return out


def _added_lines(diff: str) -> list[tuple[str, int, str]]:
    """(file, line number in the new file, text) of every added line."""
    return [(path, line, text) for kind, path, line, text in walk(diff) if kind == "+"]


def changed_lines(patch: str) -> dict[str, list[list[int]]]:
    """Each file -> the ranges of new-file lines the patch added, or where it removed
    lines (``[first, last]``): what a check asks to tell code the run wrote from code it
    only sits next to. Empty without a patch (asked for with forbidden patterns)."""
    out: dict[str, list[list[int]]] = {}
    for _kind, path, line, _ in walk(patch):
        ranges = out.setdefault(path, [])
        if ranges and ranges[-1][0] <= line <= ranges[-1][1] + 1:
            ranges[-1][1] = max(ranges[-1][1], line)
        else:
            ranges.append([line, line])
    return out


class GitDiffParser:
    """Diff statistics and boundary checks of the working tree against the run's base."""

    name = NAME
    facts = FACTS
    empty_facts = EMPTY_FACTS

    def parse(self, data: ParseInput) -> Observation:
        try:
            patterns = forbidden_matchers(data)
        except re.error as exc:
            return unusable(NAME, data, f"invalid forbidden pattern: {exc}", EMPTY_FACTS)
        got = data.git_output
        if not isinstance(got, GitOutput):
            message = "no git output to read (git_diff observes through looprun's checks)"
            return unusable(NAME, data, message, EMPTY_FACTS)
        if got.error is not None:
            return unusable(NAME, data, got.error, EMPTY_FACTS)
        return self._observe(data, got.numstat, got.status, got.patch, patterns)

    def _observe(
        self,
        data: ParseInput,
        numstat: str,
        status: str,
        patch: str,
        patterns: Matchers,
    ) -> Observation:
        files: list[str] = []
        binary: list[str] = []
        added = removed = 0
        for record in numstat.split("\0"):
            parts = record.split("\t", 2)
            if len(parts) != 3:
                continue
            a, r, path = parts
            files.append(path)
            if a == "-":
                binary.append(path)
            else:
                added += int(a)
                removed += int(r)
        fields = status.split("\0")
        new_files = [fields[i + 1] for i in range(0, len(fields) - 1, 2) if fields[i] == "A"]
        deleted = [fields[i + 1] for i in range(0, len(fields) - 1, 2) if fields[i] == "D"]
        allow = as_list(option(data, "allow"))
        deny = as_list(option(data, "deny"))
        allowed = set(matching(files, *allow)) if allow else set(files)
        denied = set(matching(files, *deny)) if deny else set()
        outside = [f for f in files if f not in allowed or f in denied]
        forbidden: list[dict[str, Any]] = []
        for file, line, text in _added_lines(patch):
            pieces = source_lines(text)
            for pattern, rx in patterns:
                found = any((rx.search(p) if rx else pattern in p) for p in pieces)
                if found and len(forbidden) < _MAX_FORBIDDEN:
                    forbidden.append(
                        {
                            "file": file,
                            "line": line,
                            "pattern": pattern,
                            "text": clip(shown(text.strip()), 200),
                        }
                    )
        lines = added + removed
        max_lines = option(data, "max_lines")
        too_big = max_lines is not None and lines > int(max_lines)
        items = [
            Item(
                id=f,
                file=f,
                message="changed outside the allowed paths",
                severity="error",
                rule="outside",
            )
            for f in outside
        ] + [
            Item(
                id=f"{h['file']}:{h['line']}",
                file=h["file"],
                line=h["line"],
                rule="forbidden",
                severity="error",
                message=f"forbidden pattern {h['pattern']!r}: {h['text']}",
            )
            for h in forbidden
        ]
        if too_big:
            items.insert(
                0,
                Item(
                    id="max_lines",
                    rule="max_lines",
                    severity="error",
                    message=f"diff has {lines} changed lines, more than max_lines={max_lines}",
                ),
            )
        ok = not outside and not forbidden and not too_big
        counts = {
            "files_changed": len(files),
            "added": added,
            "removed": removed,
            "lines": lines,
        }
        header = f"diff: {len(files)} file(s) changed, +{added} -{removed}" + (
            f", {len(binary)} binary" if binary else ""
        )
        facts = {
            **counts,
            "files": files,
            "outside": outside,
            "forbidden": forbidden,
            "binary": binary,
            "files_added": new_files,
            "files_deleted": deleted,
            "changed_lines": changed_lines(patch),
        }
        return Observation(
            parser=NAME,
            ok=ok,
            exit_code=data.exit_code,
            counts=freeze(counts),
            items=tuple(items),
            signature=signature_of(items),
            feedback=render(header, items, max_bytes=max_feedback(data), noun="more"),
            facts=freeze(facts),
        )
