"""The commands a model proposes through the ``run`` tool, judged before they start.

A command is split with ``shlex`` and never given to a shell, so shell syntax is refused
unless an allowed pattern permits it; it must match an allowed pattern; a wrapper that
runs other code needs a pattern that allows it; and every argument naming a path must
stay inside the working directory, out of ``.git``, ``.looprun`` and the denied globs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

import pathspec

from looprun.act import commandline
from looprun.act.protected import inside, is_protected, relative
from looprun.errors import PolicyViolation


class CommandRules:
    """The allowed ``commands`` of one template, for the working directory ``workdir``
    (resolved), with the ``deny`` globs commands may neither read nor write."""

    def __init__(self, workdir: Path, commands: Sequence[str], deny: pathspec.PathSpec):
        self.workdir = workdir
        self.commands = commands
        self.deny = deny

    def check(self, command: str) -> list[str]:
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
        patterns = [p for p in self.commands if commandline.pattern_matches(p, argv)]
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
            allowed = ", ".join(f"`{p}`" for p in self.commands) or "none"
            raise PolicyViolation(
                "command.not_allowed",
                f"`{command.strip()}` is not an allowed command (allowed: {allowed})",
            )
        self._check_paths(argv, commandline.literal_tokens(patterns))
        return argv

    def _check_paths(self, argv: list[str], literal: frozenset[str]) -> None:
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
            if not inside(where, self.workdir) or not inside(resolved, self.workdir):
                raise PolicyViolation(
                    "command.path_outside",
                    f"the argument {shown!r} names a path outside the working directory; "
                    "commands may only name paths inside it (use a relative path)",
                )
            for rel in (relative(where, self.workdir), relative(resolved, self.workdir)):
                for part in PurePosixPath(rel).parts:
                    if is_protected(part):
                        raise PolicyViolation(
                            "command.path_protected",
                            f"the argument {shown!r} names {part}/, which is off limits",
                        )
                if rel != "." and self.deny.match_file(rel):
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


def _entries(path: Path) -> list[str]:
    try:
        return os.listdir(path) if path.is_dir() else [path.name]
    except OSError:
        return []
