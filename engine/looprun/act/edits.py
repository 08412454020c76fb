"""``edit_file``'s replacement: ``old`` must occur exactly once in the text, and when it
does not, the model is told how often and where, so it can correct the call."""

from __future__ import annotations

from looprun.errors import ToolError


def replace_once(rel: str, text: str, old: str, new: str) -> tuple[str, int]:
    """``text`` with the one occurrence of ``old`` replaced by ``new``, and the line it
    starts at; ``old`` written with LF matches a CRLF file too. Raises ``ToolError``."""
    if text.count(old) == 0 and "\r\n" in text and "\r\n" not in old:
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
    count = text.count(old)
    if count != 1:
        raise ToolError(_match_problem(rel, text, old, count))
    return text.replace(old, new, 1), text.count("\n", 0, text.index(old)) + 1


def _match_problem(rel: str, text: str, old: str, count: int) -> str:
    if count == 0:
        hint = ""
        first = old.strip().splitlines()[0].strip() if old.strip() else ""
        if first and first in text:
            line = text.count("\n", 0, text.index(first)) + 1
            hint = (
                f"; its first line appears at line {line}, so check whitespace and the "
                "lines after it"
            )
        return f"`old` was found 0 times in {rel}; it must match the file exactly{hint}"
    lines = []
    start = 0
    while len(lines) < 20:
        index = text.find(old, start)
        if index < 0:
            break
        lines.append(str(text.count("\n", 0, index) + 1))
        start = index + len(old)
    return (
        f"`old` was found {count} times in {rel} (at lines {', '.join(lines)}); "
        "include more surrounding text so it matches exactly once"
    )
