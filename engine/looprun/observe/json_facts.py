"""Facts picked out of any JSON report with simple paths.

Options: ``facts`` maps a fact name to a path such as ``summary.failed``,
``results[0].score``, ``results[-1]`` or ``meta["odd.key"]``; ``ok`` is a path whose
value must be truthy for the observation to be ok (without it, ok means every path
was found). A path that is not there is a fact of ``null`` and an item saying so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from looprun.data.freeze import freeze
from looprun.observe.base import Item, Observation, ParseInput
from looprun.observe.feedback import clip, render
from looprun.observe.reports import (
    ReportProblem,
    locate_report,
    max_feedback,
    option,
    parse_json,
    read_text,
    signature_of,
    unusable,
)

NAME = "json"
_TOKEN = re.compile(r"""\.?([A-Za-z_][\w-]*)|\[(-?\d+)\]|\[(?:"([^"]*)"|'([^']*)')\]""")
_MISSING = object()


def parse_path(path: str) -> list[str | int]:
    """``a.b[0]["c.d"]`` -> ``["a", "b", 0, "c.d"]``; raises ValueError on bad syntax."""
    steps: list[str | int] = []
    pos = 0
    text = path.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos or (pos == 0 and text.startswith(".")):
            raise ValueError(f"bad path {path!r} at character {pos + 1}")
        name, index, dq, sq = m.groups()
        steps.append(int(index) if index is not None else (name or dq or sq or ""))
        pos = m.end()
    if not steps:
        raise ValueError("empty path")
    return steps


def lookup(doc: Any, steps: list[str | int]) -> Any:
    cur = doc
    for step in steps:
        if isinstance(step, int):
            if not isinstance(cur, list) or not -len(cur) <= step < len(cur):
                return _MISSING
            cur = cur[step]
        else:
            if not isinstance(cur, dict) or step not in cur:
                return _MISSING
            cur = cur[step]
    return cur


class JsonParser:
    """Named facts read from a JSON document."""

    name = NAME
    facts: frozenset[str] = frozenset()  # named by the `facts` option
    empty_facts: Mapping[str, Any] = MappingProxyType({})

    def parse(self, data: ParseInput) -> Observation:
        spec = option(data, "facts", {})
        ok_path = option(data, "ok")
        try:
            if not isinstance(spec, Mapping):
                raise ReportProblem("option `facts` must map fact names to paths")
            try:
                paths = {str(k): parse_path(str(v)) for k, v in spec.items()}
                ok_steps = parse_path(str(ok_path)) if ok_path is not None else None
            except ValueError as exc:
                raise ReportProblem(f"option `facts`/`ok`: {exc}") from None
            path, shown = locate_report(data)
            if option(data, "trust") == "exit_zero" and data.exit_code != 0:
                # a runner that writes its report last and exits 0: a report beside any
                # other end was written by something else (a test that killed the runner)
                ended = "timed out" if data.exit_code is None else f"exited {data.exit_code}"
                raise ReportProblem(f"the command {ended}, so {shown} is not its report")
            doc = parse_json(read_text(path, shown), shown)
        except ReportProblem as exc:
            return unusable(
                NAME, data, str(exc), {k: None for k in spec} if isinstance(spec, Mapping) else {}
            )
        facts: dict[str, Any] = {}
        items: list[Item] = []
        for name, steps in paths.items():
            value = lookup(doc, steps)
            if value is _MISSING:
                facts[name] = None
                items.append(Item(id=name, message=f"path {spec[name]!r} not found in {shown}"))
            else:
                facts[name] = value
        if ok_steps is not None:
            value = lookup(doc, ok_steps)
            ok = value is not _MISSING and bool(value)
            if not ok:
                shown_value = "missing" if value is _MISSING else clip(json.dumps(value), 100)
                items.insert(0, Item(id="ok", message=f"{ok_path} is {shown_value}"))
        else:
            ok = not items
        header = f"json: {len(facts)} fact(s) from {shown}" + (
            "; " + ", ".join(f"{k}={clip(json.dumps(v), 60)}" for k, v in list(facts.items())[:8])
            if facts
            else ""
        )
        return Observation(
            parser=NAME,
            ok=ok,
            exit_code=data.exit_code,
            counts=freeze({}),
            items=tuple(items),
            signature=signature_of(items),
            feedback=render(header, items, max_bytes=max_feedback(data)),
            facts=freeze(facts),
        )
