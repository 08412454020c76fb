"""Text on its way to a terminal: no control sequences, no secrets, no invalid Unicode.

Model text, tool names, refusals and test output reach stderr in progress lines. A
terminal acts on what it is sent: OSC 52 writes the clipboard, OSC 0 the window title,
CSI moves the cursor and repaints lines, a bare carriage return overwrites one. So every
write to the CLI's stdout and stderr goes through :class:`SafeStream`, which removes
escape sequences and C0/C1 control characters (tab and newline stay), escapes lone
surrogates, and replaces secret values with the Redactor.

Under GitHub Actions the runner also acts on what it reads: every output line that
starts with ``::`` (after leading blanks) is a workflow command (``::error``,
``::add-mask::``, ``::stop-commands::`` ...). A test name, a failure message or a file
name with a newline in it would start one of its own, so there the stream also gives any
such line a ``./`` in front (:func:`no_command`, the one escape ``validate`` uses too);
only looprun's own annotations, written with :func:`workflow_command`, start with ``::``.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any, TextIO

from looprun.system.redact import Redactor, escape_surrogates, secret_values

_SEQUENCES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?"  # CSI: ESC [ params intermediates final
    r"|\x1b\][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC ... BEL or ST (or unterminated)
    r"|\x1b[PX^_][^\x1b\x9c]*(?:\x1b\\|\x9c)?"  # DCS, SOS, PM, APC strings
    r"|\x9b[0-?]*[ -/]*[@-~]?"  # 8-bit CSI
    r"|[\x90\x98\x9d\x9e\x9f][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # 8-bit string starts
    r"|\x1b[ -/]*[0-~]?"  # any other escape (nF, Fp, Fe, Fs), or a bare ESC
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"  # the remaining C0 controls (not \t, \n), DEL, C1
)


# Every sequence above starts with one of these: text without any (nearly all of it,
# megabytes of JSON from `looprun observe`) is searched once by a plain character class.
_STARTS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def for_terminal(text: str) -> str:
    """``text`` without anything a terminal would act on (and valid to encode)."""
    text = escape_surrogates(text)
    if _STARTS.search(text) is None:
        return text
    return _SEQUENCES.sub("", text)


def no_command(line: str) -> str:
    """``line`` such that a GitHub runner does not read it as a workflow command: one
    that starts with ``::`` after leading blanks gets ``./`` in front (which, for a path,
    names the same file)."""
    return "./" + line if line.lstrip().startswith("::") else line


class SafeStream:
    """A text stream that cleans (and redacts) every write before passing it on;
    ``actions``: lines that would be workflow commands are escaped too."""

    def __init__(self, stream: TextIO, redactor: Redactor, actions: bool = False):
        self._stream = stream
        self._redactor = redactor
        self._actions = actions
        self._blank = True  # the current output line holds only blanks so far

    def write(self, text: str) -> int:
        clean = self._redactor.text(for_terminal(text))
        self._stream.write(self._no_commands(clean) if self._actions else clean)
        return len(text)

    def command(self, line: str) -> None:
        """Write one of looprun's own workflow commands, as one line."""
        self._stream.write(self._redactor.text(for_terminal(line.replace("\n", " "))) + "\n")
        self._blank = True

    def _no_commands(self, text: str) -> str:
        """Escape every line of ``text`` that would start a workflow command, counting
        what earlier writes left on the current line (a line may come in pieces)."""
        lines = text.split("\n")
        for i, line in enumerate(lines):
            if i == 0 and not self._blank:
                continue
            head = line.lstrip()
            if head.startswith("::") or head == ":":  # ":" may be half of a "::"
                lines[i] = no_command(line) if head != ":" else "./" + line
        last = lines[-1]
        self._blank = (self._blank if len(lines) == 1 else True) and not last.strip()
        return "\n".join(lines)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def in_actions() -> bool:
    """True when running as a GitHub Actions step (its runner reads workflow commands)."""
    return os.environ.get("GITHUB_ACTIONS") == "true"


def workflow_command(line: str) -> None:
    """Print one of looprun's own workflow commands (an annotation) on stdout: the one
    kind of line that may start with ``::``."""
    out = sys.stdout
    if isinstance(out, SafeStream):
        out.command(line)
    else:
        out.write(line.replace("\n", " ") + "\n")


def guard_streams() -> None:
    """Route the process's stdout and stderr through :class:`SafeStream` (once)."""
    redactor = Redactor(secret_values())
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, SafeStream):
            setattr(sys, name, SafeStream(stream, redactor, actions=in_actions()))
