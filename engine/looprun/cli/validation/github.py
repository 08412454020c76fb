"""Problems for GitHub Actions: as ``::error`` workflow commands, which GitHub shows on
the file's line in a pull request, and as output lines that cannot forge one."""

from __future__ import annotations

import contextlib
from pathlib import Path

from looprun.cli.terminal import no_command
from looprun.errors import Problem


def one_line(text: str) -> str:
    """A problem line (``path:line:col: message``) as one output line, for GitHub
    Actions: the runner reads every output line that starts with ``::`` (after leading
    blanks) as a workflow command, so a newline from a YAML key or value would let the
    rest of it forge one (``::stop-commands::``, ``::error::``). A path that itself
    starts with ``::`` gets a ``./``, which names the same file."""
    return no_command(text.replace("\r", "\\r").replace("\n", "\\n"))


def _escape(text: str, prop: bool = False) -> str:
    """GitHub workflow-command escaping: data escapes %, CR, LF; properties also : and ,."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def annotation(problem: Problem, workspace: str | None = None) -> str:
    """``::error file=loops/x.yaml,line=12,col=5::message`` for one problem."""
    loc = problem.location
    file = loc.file
    if workspace:
        with contextlib.suppress(ValueError):
            file = Path(file).resolve().relative_to(Path(workspace).resolve()).as_posix()
    props = [f"file={_escape(file, True)}"]
    if loc.line:
        props += [f"line={loc.line}", f"col={loc.col or 1}"]
    return f"::error {','.join(props)}::{_escape(problem.message)}"
