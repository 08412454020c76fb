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

Commands: split with ``shlex``, never given to a shell; see ``commandline``.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pathspec

from looprun.act import commandline, diffcheck
from looprun.data.changes import DOCTEST_SUFFIXES, FileChange, lost_examples
from looprun.data.patchtext import shown, source_lines
from looprun.errors import PolicyViolation
from looprun.template.model import Constraints, ScopedPattern

PROTECTED_DIRS: dict[str, str] = {".git": "path.git", ".looprun": "path.looprun"}
_MAX_PATTERN_HITS = 20


@dataclass(frozen=True)
class Violation:
    """One refusal or breach, as journaled and shown to refine rules."""

    rule: str  # e.g. path.outside, command.shell_syntax, diff.too_large
    message: str
    tool: str
    detail: str = ""


def _spec(globs: Iterable[str]) -> pathspec.PathSpec:
    return pathspec.GitIgnoreSpec.from_lines(list(globs))


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
        self._allow = _spec(constraints.paths.allow or ("**",))
        self._deny = _spec(constraints.paths.deny)
        self._approve = _spec(constraints.approve)
        self._forbidden = [(p, _forbidden_matcher(p)) for p in constraints.forbidden_patterns]

    # -- paths -------------------------------------------------------------------------

    def relative(self, path: Path) -> str:
        """Workdir-relative POSIX form of an absolute path inside the workdir."""
        rel = os.path.relpath(path, self.workdir)
        return "." if rel == "." else PurePosixPath(Path(rel)).as_posix()

    def check_path(self, path: str, *, write: bool) -> Path:
        """The resolved absolute path for ``path``, or PolicyViolation saying why not."""
        if not isinstance(path, str) or not path.strip():
            raise PolicyViolation("path.invalid", "a path is required")
        if "\x00" in path:
            raise PolicyViolation("path.invalid", "the path contains a NUL byte")
        given = Path(path)
        if given.is_absolute() and _inside(Path(os.path.normpath(given)), self._given_workdir):
            given = Path(os.path.relpath(os.path.normpath(given), self._given_workdir))
        lexical = Path(os.path.normpath(given if given.is_absolute() else self.workdir / given))
        if not _inside(lexical, self.workdir):
            raise PolicyViolation(
                "path.outside", f"{path!r} is outside the working directory; use a relative path"
            )
        resolved = Path(os.path.realpath(lexical))
        if not _inside(resolved, self.workdir):
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
        if any(_protected(p) for p in parts):
            return False
        return not self._deny.match_file(rel)

    def needs_approval(self, rel_paths: Iterable[str]) -> list[str]:
        """The paths among ``rel_paths`` whose changes wait for a person's approval."""
        if not self.constraints.approve:
            return []
        return [p for p in rel_paths if self._approve.match_file(p)]

    # -- commands ----------------------------------------------------------------------

    def check_command(self, command: str) -> list[str]:
        """The argv to run for a model-proposed command, or PolicyViolation saying why not."""
        if not isinstance(command, str) or not command.strip():
            raise PolicyViolation("command.not_allowed", "a command is required")
        if "\x00" in command:
            raise PolicyViolation("command.shell_syntax", "the command contains a NUL byte")
        features = commandline.shell_features(command)
        try:
            argv = commandline.split(command)
        except ValueError as exc:
            raise PolicyViolation(
                "command.shell_syntax", f"the command cannot be split into arguments: {exc}"
            ) from None
        if not argv:
            raise PolicyViolation("command.not_allowed", "a command is required")
        patterns = [p for p in self.constraints.commands if commandline.pattern_matches(p, argv)]
        blocked = [
            f
            for f in features
            if not any(commandline.pattern_allows_feature(p, f) for p in patterns)
        ]
        if blocked:
            shown = ", ".join("a newline" if f == "newline" else f"`{f}`" for f in blocked)
            raise PolicyViolation(
                "command.shell_syntax",
                f"{shown} needs a shell, and commands run without one: run a single command "
                "per call, with no pipes, redirections, chaining or substitutions",
            )
        wrapper = commandline.wrapper_of(argv)
        if (
            patterns
            and wrapper
            and not any(commandline.pattern_allows_wrapper(p, wrapper) for p in patterns)
        ):
            raise PolicyViolation(
                "command.wrapper",
                f"`{wrapper}` runs other code, which the allowed commands do not permit",
            )
        if not patterns:
            allowed = ", ".join(f"`{p}`" for p in self.constraints.commands) or "none"
            raise PolicyViolation(
                "command.not_allowed",
                f"`{command.strip()}` is not an allowed command (allowed: {allowed})",
            )
        self._check_command_paths(argv, commandline.literal_tokens(patterns))
        return argv

    def _check_command_paths(self, argv: list[str], literal: frozenset[str]) -> None:
        """Arguments naming a path must stay inside the workdir and out of ``.git`` and
        ``.looprun`` (``pytest --basetemp=..`` would delete the parent directory)."""
        for arg in argv[1:]:
            if arg in commandline.INDIRECT_CLEARING and arg not in literal:
                raise PolicyViolation(
                    "command.unjudged",
                    f"{arg} deletes a directory named in configuration, which may lie outside "
                    "the working directory; it cannot be judged, so it is refused",
                )
        for value, option in commandline.path_arguments(argv):
            if value in literal or (option is not None and f"{option}={value}" in literal):
                continue  # written out by the template author
            shown = value if option is None else f"{option} {value}"
            why = commandline.unjudgeable(value)
            if why:
                raise PolicyViolation(
                    "command.unjudged",
                    f"the argument {shown!r} {why}; it cannot be judged, so it is refused "
                    "(write the path out, relative to the working directory)",
                )
            where = Path(os.path.normpath(self.workdir / value))
            resolved = Path(os.path.realpath(where))
            if not _inside(where, self.workdir) or not _inside(resolved, self.workdir):
                raise PolicyViolation(
                    "command.path_outside",
                    f"the argument {shown!r} names a path outside the working directory; "
                    "commands may only name paths inside it (use a relative path)",
                )
            for rel in (self.relative(where), self.relative(resolved)):
                for part in PurePosixPath(rel).parts:
                    if _protected(part):
                        raise PolicyViolation(
                            "command.path_protected",
                            f"the argument {shown!r} names {part}/, which is off limits",
                        )
                if rel != "." and self._deny.match_file(rel):
                    raise PolicyViolation(
                        "command.path_deny",
                        f"the argument {shown!r} names {rel!r}, which matches a denied path "
                        "glob (commands may neither read nor write there)",
                    )
            if option in commandline.CLEARING_OPTIONS and (
                resolved == self.workdir or (resolved.exists() and any(_entries(resolved)))
            ):
                raise PolicyViolation(
                    "command.path_protected",
                    f"{option} deletes the directory it names, and {value!r} holds files; "
                    "name a new directory instead",
                )

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

    def check_diff(self, diff_text: str) -> list[Violation]:
        """Diff size and forbidden patterns in added lines, on the real git diff (and with
        ``paths_on_diff``, every changed path against the path rules)."""
        found: list[Violation] = []
        if self.paths_on_diff:
            for path in diffcheck.changed_paths(diff_text):
                if self._deny.match_file(path) or not self._allow.match_file(path):
                    found.append(
                        Violation(
                            "path.denied",
                            f"{path} was changed, but act.constraints.paths do not allow it",
                            "diff",
                            detail=path,
                        )
                    )
        limit = self.constraints.max_diff_lines
        if limit is not None:
            stats = diffcheck.stats(diff_text)
            if stats.lines > limit:
                found.append(
                    Violation(
                        "diff.too_large",
                        f"the change touches {stats.lines} lines (+{stats.added} -{stats.removed}) "
                        f"in {len(stats.files)} file(s); the limit is {limit}",
                        "diff",
                        detail=str(stats.lines),
                    )
                )
        if self._forbidden:
            rules = [(pattern, matcher, None, "") for pattern, matcher in self._forbidden]
            found.extend(_pattern_violations(diff_text, rules))
        return found

    def check_patterns(self, diff_text: str, rules: Sequence[ScopedPattern]) -> list[Violation]:
        """See ``check_scoped_patterns``."""
        return check_scoped_patterns(diff_text, rules)


def check_scoped_patterns(diff_text: str, rules: Sequence[ScopedPattern]) -> list[Violation]:
    """Forbidden patterns in the lines the real diff adds to the files each rule covers:
    those its ``paths`` match (every file when it has none) and its ``exclude`` does not."""
    if not rules:
        return []
    scoped = [
        (rule, _spec(rule.paths or ("**",)), _spec(rule.exclude) if rule.exclude else None)
        for rule in rules
    ]

    def covers(paths: pathspec.PathSpec, exclude: pathspec.PathSpec | None) -> _Covers:
        return lambda path: paths.match_file(path) and not (exclude and exclude.match_file(path))

    rows = [(r.pattern, r.regex, covers(paths, exclude), r.message) for r, paths, exclude in scoped]
    return _pattern_violations(diff_text, rows)


_Covers = Callable[[str], bool]


def _pattern_violations(
    diff_text: str, rules: Sequence[tuple[str, re.Pattern[str], _Covers | None, str]]
) -> list[Violation]:
    """One violation per added line a rule's pattern matches (the whole line or a piece of
    it as Python splits it at a lone CR), in the files the rule covers (``None``: every
    file), at most ``_MAX_PATTERN_HITS`` of them."""
    found: list[Violation] = []
    hits = 0
    for added in diffcheck.added_lines(diff_text):
        pieces = source_lines(added.text)
        for pattern, regex, covers, message in rules:
            if covers is not None and not covers(added.path):
                continue
            if any(regex.search(piece) for piece in pieces):
                hits += 1
                if hits <= _MAX_PATTERN_HITS:
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
    spec = _spec(globs)
    new_ok = _spec(allow_new)
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
        for source, want in lost_examples(ch.old, ch.new)[:_MAX_PATTERN_HITS]:
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


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _entries(path: Path) -> list[str]:
    try:
        return os.listdir(path) if path.is_dir() else [path.name]
    except OSError:
        return []


# Characters some file systems ignore in names (HFS+ ignores these code points; NTFS
# ignores trailing dots and spaces), so ``.g\u200cit`` or ``.git.`` can be ``.git`` there.
_IGNORABLE = dict.fromkeys(
    map(ord, "\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
        "\u206a\u206b\u206c\u206d\u206e\u206f\ufeff")
)  # fmt: skip
_SHORT_NAMES = {"git~1": "path.git"}  # the 8.3 short name NTFS gives ``.git``


def protected_rule(part: str) -> str | None:
    """The rule a path component breaks by naming ``.git`` or ``.looprun`` on some file
    system (case, NFC/NFD, ignorable code points, trailing dots/spaces), or None."""
    name = unicodedata.normalize("NFC", part).translate(_IGNORABLE).casefold()
    name = name.rstrip(". ")
    return PROTECTED_DIRS.get(name) or _SHORT_NAMES.get(name)


def _protected(part: str) -> bool:
    return protected_rule(part) is not None
