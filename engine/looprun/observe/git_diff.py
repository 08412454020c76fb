"""What changed in the working tree since the run's base: files, lines, policy breaches.

The working tree is snapshotted through a private index (``Git.snapshot``), so the
user's index and branch are never touched, and untracked files count as changes.

Options: ``allow``/``deny`` (gitignore-style globs; a changed file not allowed, or
denied, is ``outside``), ``forbidden_patterns`` (substrings, or regexes written as
``re:PATTERN``, searched in *added* lines only) and ``max_lines`` (added + removed).
"""

from __future__ import annotations

import re
from typing import Any

from looprun.data.patchtext import shown, source_lines, walk
from looprun.observe import declared_facts
from looprun.observe.base import Item, Observation, ParseInput
from looprun.observe.feedback import clip, render
from looprun.observe.reports import as_list, max_feedback, option, signature_of, unusable
from looprun.template.expressions import freeze, matching
from looprun.workspace.git import EMPTY_TREE, Git, GitError
from looprun.workspace.ignore import base_ignore_rules

NAME = "git_diff"
EMPTY_FACTS = declared_facts.GIT_DIFF
FACTS = frozenset(EMPTY_FACTS)
_MAX_FORBIDDEN = 200


def _matchers(patterns: list[str]) -> list[tuple[str, re.Pattern[str] | None]]:
    out: list[tuple[str, re.Pattern[str] | None]] = []
    for p in patterns:
        out.append((p, re.compile(p[3:]) if p.startswith("re:") else None))
    return out


def _added_lines(diff: str) -> list[tuple[str, int, str]]:
    """(file, line number in the new file, text) of every added line."""
    return [(path, line, text) for kind, path, line, text in walk(diff) if kind == "+"]


class GitDiffParser:
    """Diff statistics and boundary checks of the working tree against the run's base."""

    name = NAME
    facts = FACTS
    empty_facts = EMPTY_FACTS

    def parse(self, data: ParseInput) -> Observation:
        git = Git(data.workdir, data.git_dir)
        try:
            patterns = _matchers(as_list(option(data, "forbidden_patterns")))
        except re.error as exc:
            return unusable(NAME, data, f"invalid forbidden pattern: {exc}", EMPTY_FACTS)
        try:
            if not git.is_repo():
                return unusable(
                    NAME,
                    data,
                    f"{data.workdir} is not a git repository (git_diff needs one)",
                    EMPTY_FACTS,
                )
            base = data.base or git.head() or EMPTY_TREE
            target = git.snapshot(rules=base_ignore_rules(git, base), also=data.exclude)
            numstat = git.diff(base, target, "--numstat", "-z")
            status = git.diff(base, target, "--name-status", "-z")
            patch = git.diff(base, target, "-U0") if patterns else ""
        except GitError as exc:
            return unusable(NAME, data, str(exc), EMPTY_FACTS)
        except OSError as exc:
            return unusable(NAME, data, f"{data.workdir}: cannot run git: {exc}", EMPTY_FACTS)
        return self._observe(data, numstat, status, patch, patterns)

    def _observe(
        self,
        data: ParseInput,
        numstat: str,
        status: str,
        patch: str,
        patterns: list[tuple[str, re.Pattern[str] | None]],
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
