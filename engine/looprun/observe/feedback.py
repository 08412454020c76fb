"""Compact, bounded feedback text: the most useful findings first, never a whole log.

Every failing item gets one line (id, file:line, message) while room lasts; the first
ones also get their key traceback lines. Whatever does not fit is summarised as
"... and N more", so a 10 MB log still yields a few KB that name what failed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from looprun.observe.base import Item

DEFAULT_MAX_FEEDBACK = 4096
_MAX_LINE = 400
_SEVERITY_ORDER = {"error": 0, "failure": 0, "warning": 1, "note": 2}


# CSI sequences (colours, cursor moves) and OSC sequences (hyperlinks) that tools print
# under --color=yes / FORCE_COLOR / --pretty: they would break every line pattern.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")


def strip_ansi(text: str) -> str:
    """``text`` without terminal escape sequences."""
    return _ANSI.sub("", text) if "\x1b" in text else text


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, marking the cut."""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def location(item: Item) -> str:
    if not item.file:
        return ""
    loc = item.file
    if item.line:
        loc += f":{item.line}"
        if item.col:
            loc += f":{item.col}"
    return loc


def item_line(item: Item) -> str:
    """One line naming an item: ``id (file:line): message`` or ``file:line: sev [rule] msg``."""
    loc = location(item)
    message = item.message.splitlines()[0] if item.message else ""
    if item.rule and item.rule == item.id:
        head = f"{loc}: " if loc else ""
        return clip(f"{head}{item.severity} [{item.rule}] {message}".rstrip(), _MAX_LINE)
    if item.file and item.id == item.file:
        return clip(f"{loc}: {message}", _MAX_LINE)
    where = f" ({loc})" if loc else ""
    return clip(f"{item.id}{where}: {message}".rstrip(": "), _MAX_LINE)


def ordered(items: Sequence[Item]) -> list[Item]:
    """Errors and failures before warnings before notes; stable otherwise."""
    return sorted(items, key=lambda i: _SEVERITY_ORDER.get(i.severity, 3))


def render(
    header: str,
    items: Sequence[Item],
    *,
    max_bytes: int = DEFAULT_MAX_FEEDBACK,
    footer: str = "",
    noun: str = "more",
) -> str:
    """Header, one line per item (details for the first ones), then ``and N more``."""
    max_bytes = max(256, int(max_bytes))
    items = ordered(items)
    lines = [clip(header, _MAX_LINE)] if header else []
    used = sum(_size(x) + 1 for x in lines)
    heads = [item_line(i) for i in items]
    # Room kept for the remaining id lines, so details never crowd out a failing id.
    rest = sum(_size(h) + 1 for h in heads)
    reserve = 40 + (_size(footer) + 1 if footer else 0)
    shown = 0
    for item, head in zip(items, heads, strict=True):
        rest -= _size(head) + 1
        if used + _size(head) + 1 + reserve > max_bytes:
            break
        lines.append(head)
        used += _size(head) + 1
        shown += 1
        if item.detail:
            detail = "\n".join("    " + d for d in item.detail.splitlines() if d.strip())
            if detail and used + _size(detail) + 1 + rest + reserve <= max_bytes:
                lines.append(detail)
                used += _size(detail) + 1
    if shown < len(items):
        lines.append(f"... and {len(items) - shown} {noun}")
    if footer:
        lines.append(clip(footer, max_bytes // 2))
    text = "\n".join(lines)
    if _size(text) > max_bytes:  # only with pathological headers/footers
        text = text.encode("utf-8")[: max_bytes - 4].decode("utf-8", "ignore") + "\n…"
    return text


def tail(text: str, max_bytes: int = DEFAULT_MAX_FEEDBACK) -> str:
    """The last ``max_bytes`` of ``text``, starting at a line boundary when possible."""
    text = strip_ansi(text)
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text.strip("\n")
    cut = data[-(max_bytes - 4) :].decode("utf-8", "ignore")
    newline = cut.find("\n")
    if 0 <= newline < len(cut) // 2:
        cut = cut[newline + 1 :]
    return "…\n" + cut.strip("\n")
