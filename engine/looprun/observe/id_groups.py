"""Failing test ids written compactly, so a bounded feedback names every one of them.

Ids are grouped by their natural prefix: everything before the last separator (``::`` for
pytest, node and cargo, `` > `` for vitest, ``/`` for go subtests and paths, ``.`` for
Java's ``Class.method``). A group is written once with its members in braces, and the
parameters of one test in brackets with numeric runs as ranges::

    tests/test_x.py::{test_a[1-30, x-y], test_b}; pkg/TestParse/{empty, nested}

When that does not fit, names that differ only in their last number collapse too
(``tests/test_big.py::test_case_{0-59}``), still naming every id; only when even that does
not fit are the groups that fit written and the rest counted (``; 12 not named``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

# most specific first: ``tests/test_x.py::test_a`` splits at ``::``, not at ``/`` or ``.``
_SEPARATORS = ("::", " > ", "/", ".")
_RUN = re.compile(r"\d+-\d+", re.A)
_LAST_NUMBER = re.compile(r"^(.*?)(0|[1-9]\d*)(\D*)$", re.S | re.A)


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


@lru_cache(maxsize=1 << 14)  # the same ids are split for each size the feedback tries
def split_id(tid: str) -> tuple[str, str, str, str | None]:
    """``(prefix, separator, name, parameters)``: ``f.py::test_a[1]`` is ``("f.py", "::",
    "test_a", "1")``. No separator inside the parameters or a Java signature counts."""
    base, params = tid, None
    bracket = tid.find("[")
    if bracket > 0 and tid.endswith("]"):
        base, params = tid[:bracket], tid[bracket + 1 : -1]
    head = base.split("(", 1)[0]
    for sep in _SEPARATORS:
        cut = head.rfind(sep)
        if cut > 0 and cut + len(sep) < len(base):
            return base[:cut], sep, base[cut + len(sep) :], params
    return "", "", base, params


def _is_number(value: str) -> bool:
    """A number as written without leading zeros: ``007`` is a name, not 7."""
    return value.isascii() and value.isdigit() and (value[0] != "0" or value == "0")


def _runs(values: Sequence[str]) -> tuple[list[str], list[int]]:
    """Numbers as ascending runs (``1-30``), then the other values in their order; with
    how many values each one stands for. Where a value reads as a run itself (pytest
    joins parameters with ``-``: ``test[1-2]``), every value is written as it is."""
    if any(_RUN.fullmatch(v) for v in values):
        kept = list(dict.fromkeys(values))
        return kept, [1] * len(kept)
    found: set[int] = set()
    others: dict[str, None] = {}
    for v in values:
        if _is_number(v):
            found.add(int(v))
        else:
            others[v] = None
    numbers = sorted(found)
    out: list[str] = []
    counts: list[int] = []
    start = 0
    for i, n in enumerate(numbers):
        if i + 1 == len(numbers) or numbers[i + 1] != n + 1:
            first = numbers[start]
            out.append(str(n) if first == n else f"{first}-{n}")
            counts.append(n - first + 1)
            start = i + 1
    return out + list(others), counts + [1] * len(others)


def ranges(values: Sequence[str]) -> list[str]:
    """Numbers as ascending runs (``1-30``), then the other values in their order."""
    return _runs(values)[0]


class _Leaf:
    """A group's member as written: a name, or a name with its values (parameters in
    brackets, last numbers in braces), which a budget can cut after any value. (A plain
    class: the feedback's module is imported by every check, a dataclass costs more.)"""

    __slots__ = ("counts", "head", "tail", "values")

    def __init__(
        self,
        head: str,
        values: tuple[str, ...] = (),
        tail: str = "",
        counts: tuple[int, ...] = (),
    ) -> None:
        self.head, self.values, self.tail, self.counts = head, values, tail, counts

    def text(self, keep: int | None = None) -> str:
        if not self.values:
            return self.head
        return f"{self.head}{', '.join(self.values[:keep])}{self.tail}"

    def count(self, keep: int | None = None) -> int:
        return sum(self.counts[:keep]) if self.values else 1


def _valued(head: str, values: Sequence[str], tail: str) -> _Leaf:
    written, counts = _runs(values)
    return _Leaf(head, tuple(written), tail, tuple(counts))


def _leaves(members: Sequence[tuple[str, str | None]], tight: bool) -> list[_Leaf]:
    """A group's members written out."""
    params: dict[str, list[str]] = {}
    bare: set[str] = set()
    for name, param in members:
        found = params.setdefault(name, [])
        if param is None:
            bare.add(name)
        else:
            found.append(param)
    out: list[_Leaf] = []
    for name, found in params.items():
        if name in bare:
            out.append(_Leaf(name))
        if found:
            out.append(_valued(f"{name}[", found, "]"))
    return _collapse_numbers(out) if tight else out


def _collapse_numbers(leaves: list[_Leaf]) -> list[_Leaf]:
    """Names that differ only in their last number, as one: ``test_case_{0-59}``."""
    runs: dict[tuple[str, str], list[str]] = {}
    order: list[tuple[str, str] | _Leaf] = []  # (stem, suffix), or a leaf as it is
    for leaf in leaves:
        found = None if leaf.values else _LAST_NUMBER.match(leaf.head)
        if found is None:
            order.append(leaf)
            continue
        key = (found.group(1), found.group(3))
        if key not in runs:
            runs[key] = []
            order.append(key)
        runs[key].append(found.group(2))
    out: list[_Leaf] = []
    for entry in order:
        if isinstance(entry, _Leaf):
            out.append(entry)
            continue
        stem, suffix = entry
        numbers = runs[entry]
        if len(numbers) == 1:
            out.append(_Leaf(f"{stem}{numbers[0]}{suffix}"))
        else:
            out.append(_valued(stem + "{", numbers, "}" + suffix))
    return out


def _chunk(prefix: str, sep: str, names: Sequence[str]) -> str:
    """One group: ``prefix::name``, or ``prefix::{a, b}`` (ids without a prefix: ``{a, b}``)."""
    if len(names) == 1:
        return f"{prefix}{sep}{names[0]}"
    return f"{prefix}{sep}{{{', '.join(names)}}}"


def _groups(ids: Sequence[str]) -> dict[tuple[str, str], list[tuple[str, str | None]]]:
    groups: dict[tuple[str, str], list[tuple[str, str | None]]] = {}
    for tid in dict.fromkeys(ids):
        prefix, sep, name, params = split_id(tid)
        groups.setdefault((prefix, sep), []).append((name, params))
    return groups


def compact_ids(ids: Sequence[str], *, tight: bool = False) -> str:
    """Every id, each group's prefix written once (see the module's docstring)."""
    return "; ".join(
        _chunk(prefix, sep, [leaf.text() for leaf in _leaves(members, tight)])
        for (prefix, sep), members in _groups(ids).items()
    )


def compact_forms(ids: Sequence[str]) -> tuple[str, str]:
    """``compact_ids`` of ``ids``, grouped and grouped tighter, from one pass over them."""
    loose, tight = [], []
    for (prefix, sep), members in _groups(ids).items():
        leaves = _leaves(members, False)
        loose.append(_chunk(prefix, sep, [leaf.text() for leaf in leaves]))
        tight.append(_chunk(prefix, sep, [leaf.text() for leaf in _collapse_numbers(leaves)]))
    return "; ".join(loose), "; ".join(tight)


def _cut(prefix: str, sep: str, leaves: list[_Leaf], room: int) -> tuple[str, int, bool]:
    """As much of a group as fits in ``room`` bytes: (text, ids named, all of it)."""
    names = [leaf.text() for leaf in leaves]
    whole = _chunk(prefix, sep, names)
    if _size(whole) <= room:
        return whole, sum(leaf.count() for leaf in leaves), True
    fit = 0  # whole leaves that fit, then as many values of the next one as fit
    while fit < len(leaves) and _size(_chunk(prefix, sep, [*names[: fit + 1], "…"])) <= room:
        fit += 1
    named = sum(leaf.count() for leaf in leaves[:fit])
    shown = names[:fit]
    if fit < len(leaves) and leaves[fit].values:
        leaf, keep = leaves[fit], 0
        while (
            keep < len(leaf.values)
            and _size(_chunk(prefix, sep, [*shown, leaf.text(keep + 1), "…"])) <= room
        ):
            keep += 1
        if keep:
            shown.append(leaf.text(keep))
            named += leaf.count(keep)
    if not shown:
        return "", 0, False
    return _chunk(prefix, sep, [*shown, "…"]), named, False


def name_ids(ids: Sequence[str], budget: int, unlisted: int = 0, whole: bool = True) -> str:
    """``ids`` named within ``budget`` bytes: grouped, then grouped tighter; when even that
    does not fit, the groups (and members) that fit, then ``; K not named``. ``unlisted``
    ids are known only by their number and are counted among those not named;
    ``whole=False``: the caller knows every id cannot fit."""
    if whole and not unlisted:
        for text in compact_forms(ids):
            if _size(text) <= budget:
                return text
    total = len(dict.fromkeys(ids)) + unlisted
    named = used = 0
    parts: list[str] = []
    for (prefix, sep), members in _groups(ids).items():
        room = budget - used - 2 - _size(f"; {total - named} not named")
        text, count, whole = _cut(prefix, sep, _leaves(members, True), room)
        if text:
            parts.append(text)
            used += _size(text) + 2
            named += count
        if not whole:
            break
    left = total - named
    return "; ".join([*parts, f"{left} not named"])
