"""Text on its way to a terminal: no control sequences, no secrets, no invalid Unicode.

Model text, tool names, refusals and test output reach stderr in progress lines. A
terminal acts on what it is sent: OSC 52 writes the clipboard, OSC 0 the window title,
CSI moves the cursor and repaints lines, a bare carriage return overwrites one. So every
write to the CLI's stdout and stderr goes through :class:`SafeStream`, which removes
escape sequences and C0/C1 control characters (tab and newline stay), escapes lone
surrogates, and replaces secret values with the Redactor.
"""

from __future__ import annotations

import re
import sys
from typing import Any, TextIO

from looprun.redact import Redactor, escape_surrogates

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


class SafeStream:
    """A text stream that cleans (and redacts) every write before passing it on."""

    def __init__(self, stream: TextIO, redactor: Redactor):
        self._stream = stream
        self._redactor = redactor

    def write(self, text: str) -> int:
        self._stream.write(self._redactor.text(for_terminal(text)))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guard_streams() -> None:
    """Route the process's stdout and stderr through :class:`SafeStream` (once)."""
    from looprun.redact import secret_values

    redactor = Redactor(secret_values())
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, SafeStream):
            setattr(sys, name, SafeStream(stream, redactor))
