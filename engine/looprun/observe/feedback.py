"""Compact, bounded feedback text: the most useful findings first, never a whole log.

Every failing item gets one line (id, file:line, message) while room lasts; the first
ones also get their key traceback lines. Whatever does not fit is summarised as
"... and N more" -- for test failures with every remaining id named, grouped (see
``id_groups``) -- so a 10 MB log still yields a few KB that name what failed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from looprun.observe.base import Item
from looprun.observe.id_groups import compact_forms, compact_ids, name_ids

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


_NUMBERS = re.compile(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?")


def _cause(item: Item) -> tuple[str, str | None, int | None, str]:
    """What failures with one cause share: where it failed and the message, numbers masked
    (a parametrized test fails at one line with a different value each time)."""
    first = item.message.splitlines()[0] if item.message else ""
    return (item.severity, item.file, item.line, _NUMBERS.sub("N", first))


class _Entry:
    """The lines for one failing item, or for a group of items that fail with one cause;
    ``names``: whether those lines name every id of the group (else the last line does)."""

    __slots__ = ("detail", "head", "members", "names")

    def __init__(self, head: str, detail: str, members: list[Item], names: bool = True):
        self.head, self.detail, self.members, self.names = head, detail, members, names


def _entries(items: Sequence[Item], group: bool, max_bytes: int) -> list[_Entry]:
    """An entry per item, or per group of items that fail with one cause. A group's ids
    are grouped tighter when they would take more than a quarter of ``max_bytes``, and
    left to the last line when even that is too long."""
    if not group:
        return [_Entry(item_line(i), i.detail, [i]) for i in items]
    groups: dict[tuple[str, str | None, int | None, str], list[Item]] = {}
    for item in items:
        groups.setdefault(_cause(item), []).append(item)
    out = []
    for members in groups.values():
        first = members[0]
        if len(members) == 1:
            out.append(_Entry(item_line(first), first.detail, members))
            continue
        loc = location(first)
        message = first.message.splitlines()[0] if first.message else ""
        head = clip(
            f"{len(members)} fail with one cause{f' ({loc})' if loc else ''}: {message}",
            _MAX_LINE,
        )
        ids, tight = compact_forms([m.id for m in members])
        if _size(ids) > max_bytes // 4:
            ids = tight
        if _size(ids) > max_bytes // 4:
            out.append(_Entry(f"{head}\n  ids: on the last line", first.detail, members, False))
        else:
            out.append(_Entry(f"{head}\n  ids: {ids}", first.detail, members))
    return out


def _ids(entries: Sequence[_Entry]) -> list[str]:
    return list(dict.fromkeys(m.id for e in entries for m in e.members))


def _rest_line(
    ids: Sequence[str], noun: str, budget: int, unlisted: int, listed: bool, whole: bool
) -> str:
    """The line naming the failures whose ids no line above names, within ``budget``;
    ``listed``: none of them had a line of its own above; ``whole``: all of them fit."""
    count = len(ids) + unlisted
    lead = f"... and {count} {noun}: " if listed else f"... the {count} failing ids: "
    return lead + name_ids(ids, budget - _size(lead), unlisted, whole)


def _lead_size(ids: Sequence[str], noun: str) -> int:
    """Bytes of the last line's words before its ids (either wording), and its newline."""
    return _size(f"... and {len(ids)} {noun}: ") + len(" failing ids") + 1


def _rest_size(ids: Sequence[str], noun: str, tight: bool) -> int:
    """Bytes of the line that names every one of ``ids`` (0: none left)."""
    if not ids:
        return 0
    return _lead_size(ids, noun) + _size(compact_ids(ids, tight=tight))


def _render_grouped(
    lines: list[str],
    entries: Sequence[_Entry],
    max_bytes: int,
    reserve: int,
    noun: str,
    unlisted: int,
) -> None:
    """Lines (and details) for the first entries while the ones after them can still all
    be named; then one line naming the rest, grouped as tightly as the room asks. Only
    when even the tightest grouping of every id cannot fit are lines kept to half the
    room and the ids that do not fit counted."""
    used = sum(_size(x) + 1 for x in lines)
    room = max_bytes - reserve
    # the loosest grouping that names every id even if no entry got a line of its own
    ids = _ids(entries)
    lead = _lead_size(ids, noun)
    sizes = [used + lead + _size(form) for form in compact_forms(ids)] if ids else [0, 0]
    tight = next((t for t, size in zip((False, True), sizes, strict=True) if size <= room), None)
    every = not unlisted and tight is not None
    shown: list[_Entry] = []
    for n, entry in enumerate(entries):
        rest = [e for e in shown if not e.names] + [entry] * (not entry.names)
        after = _rest_size(_ids([*rest, *entries[n + 1 :]]), noun, bool(tight)) if every else 0
        limit = room if every else room // 2
        if used + _size(entry.head) + 1 + after > limit:
            break
        lines.append(entry.head)
        used += _size(entry.head) + 1
        shown.append(entry)
        if entry.detail:
            indent = "      " if len(entry.members) > 1 else "    "
            detail = "\n".join(indent + d for d in entry.detail.splitlines() if d.strip())
            if detail and used + _size(detail) + 1 + after <= limit:
                lines.append(detail)
                used += _size(detail) + 1
    pending = [e for e in shown if not e.names]
    rest = [*pending, *entries[len(shown) :]]
    if rest or unlisted:
        lines.append(_rest_line(_ids(rest), noun, room - used - 1, unlisted, not pending, every))


def render(
    header: str,
    items: Sequence[Item],
    *,
    max_bytes: int = DEFAULT_MAX_FEEDBACK,
    footer: str = "",
    noun: str = "more",
    group: bool = False,
    unlisted: int = 0,
) -> str:
    """Header, one line per item (details for the first ones), then ``and N more``.

    ``group``: failures with one cause (same place, same message but for numbers) share
    one line, and the failures left without a line are named on a last one, their ids
    grouped (see ``id_groups``) so every one fits when it can; ``unlisted`` failures are
    known only by their number (counted there, never named)."""
    max_bytes = max(256, int(max_bytes))
    items = ordered(items)
    lines = [clip(header, _MAX_LINE)] if header else []
    used = sum(_size(x) + 1 for x in lines)
    entries = _entries(items, group, max_bytes)
    if group:
        footer_size = _size(clip(footer, max_bytes // 2)) + 1 if footer else 0
        _render_grouped(lines, entries, max_bytes, footer_size, noun, unlisted)
        return _finish(lines, footer, max_bytes)
    # Room kept for the remaining id lines, so details never crowd out a failing id.
    rest = sum(_size(e.head) + 1 for e in entries)
    reserve = 40 + (_size(footer) + 1 if footer else 0)
    shown = 0
    for entry in entries:
        rest -= _size(entry.head) + 1
        if used + _size(entry.head) + 1 + reserve > max_bytes:
            break
        lines.append(entry.head)
        used += _size(entry.head) + 1
        shown += 1
        if entry.detail:
            detail = "\n".join("    " + d for d in entry.detail.splitlines() if d.strip())
            if detail and used + _size(detail) + 1 + rest + reserve <= max_bytes:
                lines.append(detail)
                used += _size(detail) + 1
    if shown < len(entries):
        lines.append(f"... and {len(entries) - shown} {noun}")
    return _finish(lines, footer, max_bytes)


def _finish(lines: list[str], footer: str, max_bytes: int) -> str:
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
