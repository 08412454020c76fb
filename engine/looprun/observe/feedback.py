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


_NUMBERS = re.compile(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?")


def _cause(item: Item) -> tuple[str, str | None, int | None, str]:
    """What failures with one cause share: where it failed and the message, numbers masked
    (a parametrized test fails at one line with a different value each time)."""
    first = item.message.splitlines()[0] if item.message else ""
    return (item.severity, item.file, item.line, _NUMBERS.sub("N", first))


def compact_ids(ids: Sequence[str]) -> str:
    """Every id, written once with its shared parts: ``f.py::test_x[a, b]`` for the
    parameters of one test, ``f.py::{test_a, test_b}`` for tests of one file."""
    by_test: dict[str, list[str]] = {}
    for tid in ids:
        base, bracket, param = tid.partition("[")
        key = base if bracket and param.endswith("]") else tid
        by_test.setdefault(key, [])
        if key != tid:
            by_test[key].append(param[:-1])
    tests = [f"{base}[{', '.join(ps)}]" if ps else base for base, ps in by_test.items()]
    by_file: dict[str, list[str]] = {}
    for test in tests:
        file, sep, name = test.partition("::")
        by_file.setdefault(file if sep else "", []).append(name if sep else test)
    out = []
    for file, names in by_file.items():
        if not file:
            out += names
        elif len(names) == 1:
            out.append(f"{file}::{names[0]}")
        else:
            out.append(f"{file}::{{{', '.join(names)}}}")
    return "; ".join(out)


def _entries(items: Sequence[Item], group: bool) -> list[tuple[str, str, list[Item]]]:
    """(lines naming the items, detail, the items) per item, or per group of items
    that fail with one cause."""
    if not group:
        return [(item_line(i), i.detail, [i]) for i in items]
    groups: dict[tuple[str, str | None, int | None, str], list[Item]] = {}
    for item in items:
        groups.setdefault(_cause(item), []).append(item)
    out = []
    for members in groups.values():
        first = members[0]
        if len(members) == 1:
            out.append((item_line(first), first.detail, members))
            continue
        loc = location(first)
        message = first.message.splitlines()[0] if first.message else ""
        head = clip(
            f"{len(members)} fail with one cause{f' ({loc})' if loc else ''}: {message}",
            _MAX_LINE,
        )
        ids = compact_ids([m.id for m in members])
        out.append((f"{head}\n  ids: {ids}", first.detail, members))
    return out


def _more(left: Sequence[Item], noun: str) -> str:
    """The line for failures that get no line of their own: how many, and their ids."""
    return f"... and {len(left)} {noun}: {compact_ids(list(dict.fromkeys(i.id for i in left)))}"


def render(
    header: str,
    items: Sequence[Item],
    *,
    max_bytes: int = DEFAULT_MAX_FEEDBACK,
    footer: str = "",
    noun: str = "more",
    group: bool = False,
) -> str:
    """Header, one line per item (details for the first ones), then ``and N more``.

    ``group``: failures with one cause (same place, same message but for numbers) share
    one line and list their ids compactly, so a hundred failing tests are all named."""
    max_bytes = max(256, int(max_bytes))
    items = ordered(items)
    lines = [clip(header, _MAX_LINE)] if header else []
    used = sum(_size(x) + 1 for x in lines)
    entries = _entries(items, group)
    # Room kept for the remaining id lines, so details never crowd out a failing id.
    rest = sum(_size(h) + 1 for h, _, _ in entries)
    reserve = 40 + (_size(footer) + 1 if footer else 0)
    # with ``group``, when not every entry gets its line, a last line names the ids left
    # out; kept only if every id can be named that way, else lines while room lasts
    name_rest = group and used + _size(_more(items, noun)) + 1 + reserve <= max_bytes
    shown = 0
    for n, (head, detail_text, members) in enumerate(entries):
        rest -= _size(head) + 1
        if used + _size(head) + 1 + reserve > max_bytes:
            break
        if (
            name_rest
            and n + 1 < len(entries)
            and used + _size(head) + 1 + rest + reserve > max_bytes
        ):
            left = [m for _, _, ms in entries[n + 1 :] for m in ms]
            if used + _size(head) + 1 + _size(_more(left, noun)) + 1 + reserve > max_bytes:
                break
        lines.append(head)
        used += _size(head) + 1
        shown += 1
        if detail_text:
            indent = "      " if len(members) > 1 else "    "
            detail = "\n".join(indent + d for d in detail_text.splitlines() if d.strip())
            if detail and used + _size(detail) + 1 + rest + reserve <= max_bytes:
                lines.append(detail)
                used += _size(detail) + 1
    if shown < len(entries):
        left = [m for _, _, ms in entries[shown:] for m in ms]
        more = _more(left, noun) if group else f"... and {len(left)} {noun}"
        lines.append(clip(more, max(40, max_bytes - used - reserve + 40)))
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
