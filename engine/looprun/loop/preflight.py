"""Checks that can never pass are found before any token is spent.

An observer whose program does not exist (a misspelt test command, a tool that is not
installed) fails the same way whatever the model edits, so retrying it only spends
tokens. Before a run's first model call the engine renders each observer's ``run`` as
it would for iteration 1 and looks up the program it starts. Only what can be decided
reliably is checked: the first word of a simple command (after ``NAME=value``
assignments), looked up on ``PATH`` or, when it names a path, relative to the working
directory. A shell builtin, keyword, compound or anything with shell syntax in its first
word is not checked. During a run, the shell's own verdict (exit 126: not executable,
127: not found) stops the run the same way.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from looprun.observe.base import Observation
from looprun.template.model import ObserverSpec

# Exit statuses a POSIX shell uses for a command it could not start.
CANNOT_RUN = {126: "is not executable", 127: "was not found"}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
# Builtins and keywords of a POSIX shell (and the common bash ones): not programs.
_SHELL_WORDS = frozenset(
    [
        "!",
        "{",
        "}",
        "[",
        "[[",
        "]]",
        ".",
        ":",
        "alias",
        "bg",
        "break",
        "builtin",
        "case",
        "cd",
        "command",
        "continue",
        "declare",
        "do",
        "done",
        "echo",
        "elif",
        "else",
        "esac",
        "eval",
        "exec",
        "exit",
        "export",
        "false",
        "fc",
        "fg",
        "for",
        "function",
        "getopts",
        "hash",
        "if",
        "in",
        "jobs",
        "kill",
        "let",
        "local",
        "printf",
        "pwd",
        "read",
        "readonly",
        "return",
        "select",
        "set",
        "shift",
        "source",
        "test",
        "then",
        "time",
        "times",
        "trap",
        "true",
        "type",
        "typeset",
        "ulimit",
        "umask",
        "unalias",
        "unset",
        "until",
        "wait",
        "while",
    ]
)
_SHELL_SYNTAX = set("$`(){}<>|&;*?[]~\\")


def program_of(command: str) -> str | None:
    """The program a simple shell command starts, or None when that cannot be decided."""
    try:
        words = shlex.split(command, comments=True, posix=True)
    except ValueError:
        return None
    while words and _ASSIGNMENT.match(words[0]):
        words = words[1:]
    if not words:
        return None
    first = words[0]
    if first in _SHELL_WORDS or _SHELL_SYNTAX & set(first):
        return None
    return first


def missing_program(command: str, workdir: Path, env: Mapping[str, str] | None = None) -> str:
    """Why the command's program cannot start ('' when it can, or when it cannot be told)."""
    program = program_of(command)
    if program is None:
        return ""
    if "/" in program:
        path = Path(program).expanduser()
        path = path if path.is_absolute() else workdir / path
        if not path.exists():
            return f"{program} does not exist"
        if path.is_dir() or not os.access(path, os.X_OK):
            return f"{program} is not executable"
        return ""
    search = (os.environ if env is None else env).get("PATH", os.defpath)
    if shutil.which(program, path=search) is None:
        return f"{program} was not found on PATH"
    return ""


def preflight(
    observers: Mapping[str, ObserverSpec], context: Mapping[str, Any], workdir: Path
) -> str:
    """The first observer whose program cannot start, as a reason naming the observer,
    the command and where the template sets it; '' when every one can (or cannot be told).

    A ``when`` that is false (or cannot be evaluated yet) skips the observer: its command
    is checked by the shell when it does run.
    """
    for name, spec in observers.items():
        if spec.run is None:
            continue
        try:
            if spec.when is not None and not spec.when.evaluate(context):
                continue
            command = spec.run.render(context)
        except Exception:  # not decidable before the run: leave it to the run
            continue
        why = missing_program(command, workdir)
        if why:
            return (
                f"observer {name!r} cannot run: {why} ({spec.run.location}: run: "
                f"{command.strip()}); fix the command or install the program"
            )
    return ""


def cannot_run(name: str, spec: ObserverSpec, obs: Observation) -> str:
    """The reason to stop when an observer's command exited 126/127: '' otherwise."""
    if spec.run is None or not obs.ran or obs.exit_code not in CANNOT_RUN:
        return ""
    said = ""
    for line in reversed((obs.feedback or obs.error or "").splitlines()):
        if "not found" in line or "ermission denied" in line or "not executable" in line:
            said = line.strip()
            break
    return (
        f"observer {name!r} could not run its command ({spec.run.location}): the shell "
        f"exited {obs.exit_code} (the program {CANNOT_RUN[obs.exit_code or 0]})"
        + (f": {said}" if said else "")
        + "; no edit can fix that, so the run stops instead of retrying"
    )
