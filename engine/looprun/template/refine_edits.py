"""Refine edits: a template that extends another adds, replaces or removes rules without
restating the inherited tree.

``refine`` as a list replaces the inherited tree; as a mapping it edits it::

    refine:
      replace: {lint: {if: ..., then: ...}, coverage: null}   # by rule id; null removes
      insert: [{after: tests_failing, rules: [...]}]          # next to a rule, by id
      before: [...]                                           # ahead of every inherited rule
      after: [...]                                            # behind them, ahead of a final else

Edits apply in that order (replace, insert, before, after). A replacing rule without an
``id`` keeps the id it replaces, so a later layer can still name it. Every rule keeps the
location of the file it was written in, so a mistake in an added rule is reported there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from looprun.errors import Location, Problem
from looprun.template.suggest import did_you_mean
from looprun.template.yamlpos import Document, JsonPath

EDIT_KEYS = ("replace", "insert", "before", "after")
_BRANCHES = ("then", "else")

# One table per kind of location a layer keeps (values, keys, blocks).
Tables = tuple[dict[JsonPath, Location], ...]


@dataclass
class _Node:
    """A rule, its sub-tree as nodes (``branch`` is ``then`` or ``else``), and the locations
    written in the rule itself (paths relative to it, the sub-tree's own excluded)."""

    value: Any
    locs: list[dict[JsonPath, Location]]
    branch: str | None = None
    kids: list[_Node] = field(default_factory=list)


def _build(rules: Any, tables: Tables, prefix: JsonPath) -> list[_Node]:
    if not isinstance(rules, list):
        return []
    out = []
    for i, rule in enumerate(rules):
        at = (*prefix, i)
        n = len(at)
        locs = [{p[n:]: loc for p, loc in t.items() if p[:n] == at} for t in tables]
        branch = next(
            (k for k in _BRANCHES if isinstance(rule, dict) and isinstance(rule.get(k), list)),
            None,
        )
        if branch is None:
            out.append(_Node(rule, locs))
            continue
        own = [{p: loc for p, loc in t.items() if p[:1] != (branch,) or len(p) == 1} for t in locs]
        out.append(_Node(rule, own, branch, _build(rule[branch], tables, (*at, branch))))
    return out


def _render(rules: list[_Node], prefix: JsonPath, width: int) -> tuple[list[Any], Tables]:
    values: list[Any] = []
    tables: Tables = tuple({} for _ in range(width))
    for i, node in enumerate(rules):
        at = (*prefix, i)
        value = node.value
        if node.branch is not None:
            kids, kid_tables = _render(node.kids, (*at, node.branch), width)
            value = {**value, node.branch: kids}
            for table, extra in zip(tables, kid_tables, strict=True):
                table.update(extra)
        for table, locs in zip(tables, node.locs, strict=True):
            table.update({(*at, *p): loc for p, loc in locs.items()})
        values.append(value)
    return values, tables


def _ids(rules: list[_Node]) -> list[str]:
    out: list[str] = []
    for node in rules:
        if isinstance(node.value, dict) and isinstance(node.value.get("id"), str):
            out.append(node.value["id"])
        out += _ids(node.kids)
    return out


def _find(rules: list[_Node], rid: Any) -> tuple[list[_Node], int] | None:
    """The list holding the rule with id ``rid``, and its index there."""
    for i, node in enumerate(rules):
        if isinstance(node.value, dict) and node.value.get("id") == rid:
            return rules, i
        found = _find(node.kids, rid)
        if found is not None:
            return found
    return None


class RefineEditor:
    """Applies one layer's refine edits to the inherited tree, collecting located problems."""

    def __init__(self, base: Any, tables: Tables, doc: Document, at: JsonPath):
        self.width = len(tables)
        self.rules = _build(base, tables, ("refine",))
        self.doc = doc
        self.at = at  # where the edits sit in ``doc``
        self.problems: list[Problem] = []

    def _new(self, raw: Any, path: JsonPath) -> list[_Node]:
        return _build(raw, (self.doc.values, self.doc.keys, self.doc.blocks), path)

    def _bad(self, path: JsonPath, message: str, *, key: bool = False) -> None:
        loc = self.doc.key_at(path) if key else self.doc.value_at(path)
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path[1:])
        self.problems.append(Problem(loc, f"refine{where}: {message}"))

    def _unknown(self, path: JsonPath, rid: Any, *, key: bool = False) -> None:
        known = _ids(self.rules)
        hint = did_you_mean(str(rid), known)
        listed = f" (ids: {', '.join(known)})" if known else " (no inherited rule has an `id`)"
        message = f"no rule with id '{rid}' in the inherited refine tree{hint or listed}"
        self._bad(path, message, key=key)

    def apply(self, edits: dict[str, Any]) -> tuple[list[Any], Tables]:
        """The edited tree and its locations, re-keyed under ``refine``."""
        for key in edits:
            if key not in EDIT_KEYS:
                hint = did_you_mean(str(key), EDIT_KEYS) or f" (edits: {', '.join(EDIT_KEYS)})"
                self._bad((*self.at, key), f"unknown refine edit '{key}'{hint}", key=True)
        self._replace(edits.get("replace"))
        self._insert(edits.get("insert"))
        for where in ("before", "after"):
            raw = edits.get(where)
            if raw is None:
                continue
            if not isinstance(raw, list):
                self._bad((*self.at, where), "expected a list of rules")
                continue
            added = self._new(raw, (*self.at, where))
            if where == "before":
                self.rules[:0] = added
                continue
            last = self.rules[-1].value if self.rules else None
            end = len(self.rules) - (1 if isinstance(last, dict) and "else" in last else 0)
            self.rules[end:end] = added
        return _render(self.rules, ("refine",), self.width)

    def _replace(self, raw: Any) -> None:
        if raw is None:
            return
        path = (*self.at, "replace")
        if not isinstance(raw, dict):
            self._bad(path, "expected a mapping of rule ids to rules (null removes a rule)")
            return
        for rid, rule in raw.items():
            found = _find(self.rules, rid)
            if found is None:
                self._unknown((*path, rid), rid, key=True)
                continue
            if rule is not None and not isinstance(rule, dict):
                self._bad((*path, rid), "expected a rule (a mapping), or null to remove the rule")
                continue
            holder, index = found
            if rule is None:
                del holder[index]
                continue
            holder[index] = self._one(rule, (*path, rid))

    def _one(self, rule: dict[str, Any], path: JsonPath) -> _Node:
        """A rule written at ``path`` (a mapping value, not a list item); it keeps the id
        of the rule it replaces unless it names its own."""
        n = len(path)
        tables = tuple(
            {(0, *p[n:]): loc for p, loc in t.items() if p[:n] == path}
            for t in (self.doc.values, self.doc.keys, self.doc.blocks)
        )
        return _build([{**rule, "id": rule.get("id", path[-1])}], tables, ())[0]

    def _insert(self, raw: Any) -> None:
        if raw is None:
            return
        path = (*self.at, "insert")
        if not isinstance(raw, list):
            self._bad(path, "expected a list of {before: ID, rules: [...]} or {after: ID, ...}")
            return
        for i, item in enumerate(raw):
            ipath = (*path, i)
            if not isinstance(item, dict):
                self._bad(ipath, "expected a mapping: {before: ID, rules: [...]}")
                continue
            for key in item:
                if key not in ("before", "after", "rules"):
                    hint = did_you_mean(str(key), ("before", "after", "rules"))
                    self._bad((*ipath, key), f"unknown key '{key}'{hint}", key=True)
            sides = [k for k in ("before", "after") if k in item]
            if len(sides) != 1 or not isinstance(item[sides[0]], str):
                self._bad(ipath, "give one rule id, as `before` or as `after`")
                continue
            rules = item.get("rules")
            if not isinstance(rules, list) or not rules:
                self._bad(
                    (*ipath, "rules") if "rules" in item else ipath,
                    "`rules`: a non-empty list of rules",
                )
                continue
            side, rid = sides[0], item[sides[0]]
            found = _find(self.rules, rid)
            if found is None:
                self._unknown((*ipath, side), rid)
                continue
            holder, index = found
            at = index if side == "before" else index + 1
            holder[at:at] = self._new(rules, (*ipath, "rules"))
