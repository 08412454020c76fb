"""The boundaries a template sets on the model, enforced by the engine on every call.

Paths: every path is resolved (``realpath``) and must stay inside the workdir, so
``..``, absolute paths elsewhere and symlinks pointing out (the file itself or any
parent directory) are refused. ``.git`` (at any depth, since hooks live there) and the
engine's own ``.looprun`` directory are off limits for reads and writes alike.

Reads are allowed anywhere else inside the workdir except the ``deny`` globs: a model
needs to read configuration and neighbouring code to make a good change. Writes must
also match an ``allow`` glob. Globs are gitignore-style (``**`` understood), matched
against the workdir-relative path both as written and as resolved, so a symlink cannot
launder a denied path.

Commands: split with ``shlex``, never given to a shell; see ``commands.py``. Rules on the
real diff are in ``diffrules.py``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath

from looprun.act.commands import CommandRules
from looprun.act.diffreview import DiffReview, Reviewer
from looprun.act.diffrules import Violation, check_protected, glob_spec
from looprun.act.protected import inside, is_protected, protected_rule, relative
from looprun.data.changes import FileChange
from looprun.data.patchtext import chunks
from looprun.errors import PolicyViolation
from looprun.template.model import Constraints, ScopedPattern


def _forbidden_matcher(pattern: str) -> re.Pattern[str]:
    """``re:...`` is a regular expression; anything else is a literal substring."""
    if pattern.startswith("re:"):
        return re.compile(pattern[3:])
    return re.compile(re.escape(pattern))


class Policy:
    """Checks paths, commands and diffs against one template's act constraints."""

    def __init__(self, workdir: Path, constraints: Constraints, *, paths_on_diff: bool = False):
        # paths_on_diff: the path rules are checked on the diff too, for actors (agent
        # CLIs) whose writes looprun cannot refuse as they happen
        self.paths_on_diff = paths_on_diff
        self.workdir = Path(os.path.realpath(workdir))
        self._given_workdir = Path(os.path.abspath(workdir))
        self.constraints = constraints
        self._allow = glob_spec(constraints.paths.allow or ("**",))
        self._deny = glob_spec(constraints.paths.deny)
        self._approve = glob_spec(constraints.approve)
        self._forbidden = [(p, _forbidden_matcher(p)) for p in constraints.forbidden_patterns]
        self._commands = CommandRules(self.workdir, constraints.commands, self._deny)
        self._reviewer = self._new_reviewer()

    # -- paths -------------------------------------------------------------------------

    def relative(self, path: Path) -> str:
        """Workdir-relative POSIX form of an absolute path inside the workdir."""
        return relative(path, self.workdir)

    def check_path(self, path: str, *, write: bool) -> Path:
        """The resolved absolute path for ``path``, or PolicyViolation saying why not."""
        if not isinstance(path, str) or not path.strip():
            raise PolicyViolation("path.invalid", "a path is required")
        if "\x00" in path:
            raise PolicyViolation("path.invalid", "the path contains a NUL byte")
        given = Path(path)
        if given.is_absolute() and inside(Path(os.path.normpath(given)), self._given_workdir):
            given = Path(os.path.relpath(os.path.normpath(given), self._given_workdir))
        lexical = Path(os.path.normpath(given if given.is_absolute() else self.workdir / given))
        if not inside(lexical, self.workdir):
            raise PolicyViolation(
                "path.outside", f"{path!r} is outside the working directory; use a relative path"
            )
        resolved = Path(os.path.realpath(lexical))
        if not inside(resolved, self.workdir):
            raise PolicyViolation(
                "path.outside",
                f"{path!r} resolves through a symlink to a place outside the working directory",
            )
        rel_lexical = self.relative(lexical)
        rel_resolved = self.relative(resolved)
        for rel in (rel_lexical, rel_resolved):
            for part in PurePosixPath(rel).parts:
                rule = protected_rule(part)
                if rule:
                    raise PolicyViolation(rule, f"{path!r} is inside {part}/, which is off limits")
        if rel_resolved == ".":
            return resolved
        for rel in {rel_lexical, rel_resolved}:
            if self._deny.match_file(rel):
                raise PolicyViolation("path.deny", f"{rel!r} matches a denied path glob")
        if write and not self._allow.match_file(rel_resolved):
            allowed = ", ".join(self.constraints.paths.allow)
            raise PolicyViolation(
                "path.not_allowed", f"writing {rel_resolved!r} is not allowed (allowed: {allowed})"
            )
        return resolved

    def readable(self, rel: str) -> bool:
        """Whether a workdir-relative path may be shown in listings and searches."""
        parts = PurePosixPath(rel).parts
        if any(is_protected(p) for p in parts):
            return False
        return not self._deny.match_file(rel)

    def needs_approval(self, rel_paths: Iterable[str]) -> list[str]:
        """The paths among ``rel_paths`` whose changes wait for a person's approval."""
        if not self.constraints.approve:
            return []
        return [p for p in rel_paths if self._approve.match_file(p)]

    # -- commands ----------------------------------------------------------------------

    def check_command(self, command: str) -> list[str]:
        """The argv to run for a model-proposed command, or PolicyViolation saying why not
        (see ``commands.CommandRules``)."""
        return self._commands.check(command)

    # -- diffs -------------------------------------------------------------------------

    def check_protected(
        self,
        changes: Iterable[FileChange],
        globs: Iterable[str],
        doctests: bool,
        scope: str,
        allow_new: Iterable[str] = (),
    ) -> list[Violation]:
        """See ``check_protected``: protected paths and doctests on the real change."""
        return check_protected(changes, globs, doctests, scope, allow_new)

    def review_diff(
        self, parts: Sequence[str], scoped: Sequence[ScopedPattern]
    ) -> tuple[list[Violation], int]:
        """What :meth:`check_diff` and :meth:`check_patterns` find in the real diff, given
        as its per-file ``parts`` in diff order, and the lines it adds and removes. A part
        seen in the last review is not read again (see ``diffreview``)."""
        review = self._reviewer.review(parts, scoped)
        return [*self._diff_violations(review), *review.scoped], review.lines

    def check_diff(self, diff_text: str) -> list[Violation]:
        """Diff size and forbidden patterns in added lines, on the real git diff (and with
        ``paths_on_diff``, every changed path against the path rules)."""
        return self._diff_violations(self._new_reviewer().review(chunks(diff_text), ()))

    def check_patterns(self, diff_text: str, rules: Sequence[ScopedPattern]) -> list[Violation]:
        """See ``check_scoped_patterns``."""
        return list(self._new_reviewer().review(chunks(diff_text), rules).scoped)

    def _new_reviewer(self) -> Reviewer:
        rules = [(pattern, matcher, None, "") for pattern, matcher in self._forbidden]
        return Reviewer(self._denied_on_diff, rules)

    def _denied_on_diff(self, path: str) -> bool:
        if not self.paths_on_diff:
            return False
        return bool(self._deny.match_file(path) or not self._allow.match_file(path))

    def _diff_violations(self, review: DiffReview) -> list[Violation]:
        found = [
            Violation(
                "path.denied",
                f"{path} was changed, but act.constraints.paths do not allow it",
                "diff",
                detail=path,
            )
            for path in review.denied
        ]
        limit = self.constraints.max_diff_lines
        if limit is not None and review.lines > limit:
            found.append(
                Violation(
                    "diff.too_large",
                    f"the change touches {review.lines} lines (+{review.added} "
                    f"-{review.removed}) in {review.files} file(s); the limit is {limit}",
                    "diff",
                    detail=str(review.lines),
                )
            )
        found.extend(review.forbidden)
        return found
