"""What every section of the builder reads the composed data through: typed values at a
path, compiled conditions and texts whose names are checked, and the problems, each
located, recorded, and passed over so that one validation shows every mistake.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from looprun.errors import Location, Problem, TemplateError
from looprun.template.compile_cache import compiled_condition, compiled_text, syntax_line
from looprun.template.expressions import Condition, NameUse, Text
from looprun.template.model import ENGINE_NAMES, Protect, Template
from looprun.template.numbers import resolve as resolve_numbers
from looprun.template.schema_check import dotted
from looprun.template.semantic import CONDITION_ENGINE_NAMES, GOAL_NAMES, name_problems
from looprun.template.yamlpos import Document, JsonPath, SourcePath

_DURATION = re.compile(
    r"^\s*(?=\d)(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s)?\s*$"
)

SubLoader = Callable[[SourcePath, Location], Template]


def parse_duration(value: Any) -> float | None:
    """Seconds from ``90``, ``"90s"``, ``"20m"``, ``"1h30m"``; None if not a duration."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if value > 0 else None
    if not isinstance(value, str):
        return None
    match = _DURATION.match(value)
    if not match or not any(match.groups()):
        return None
    h, m, s = (float(g) if g else 0.0 for g in match.groups())
    total = h * 3600 + m * 60 + s
    return total if total > 0 else None


class Reader:
    """The composed data of one template and the problems found in it so far: what every
    section reads values through, so each mistake is recorded, located, and passed over."""

    def __init__(
        self,
        doc: Document,
        sub_loader: SubLoader | None = None,
        given: Mapping[str, Any] | None = None,
    ):
        self.doc = doc
        data: dict[str, Any] = doc.data if isinstance(doc.data, dict) else {}
        self.problems: list[Problem] = []
        # numbers that name an input are resolved first, so every section reads numbers
        self.data, refs, bad = resolve_numbers(data, given)
        self.input_numbers = {dotted(path): name for path, name in refs.items()}
        for path, message in bad:
            self.problem(path, message)
        self.rule_ids: dict[str, Location] = {}
        self.sub_loader = sub_loader
        observe = self.data.get("observe")
        self.observers: dict[str, Any] = observe if isinstance(observe, dict) else {}
        inputs = self.data.get("inputs")
        self.input_names: set[str] = set(inputs) if isinstance(inputs, dict) else set()
        self.input_names.add("intent")

    def at(self, path: JsonPath) -> Location:
        return self.doc.value_at(path)

    def problem(self, path: JsonPath, message: str, *, key: bool = False) -> None:
        where = dotted(path)
        loc = self.doc.key_at(path) if key else self.doc.value_at(path)
        self.problems.append(Problem(loc, f"{where}: {message}" if where else message))

    def get(self, path: JsonPath, kind: type | tuple[type, ...], default: Any = None) -> Any:
        node: Any = self.data
        for part in path:
            if isinstance(part, int):
                if not isinstance(node, list) or part >= len(node):
                    return default
            elif not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        if kind is int and isinstance(node, bool):
            return default
        return node if isinstance(node, kind) else default

    def _check_names(
        self, use: NameUse, path: JsonPath, allowed: frozenset[str], what: str
    ) -> None:
        for message in name_problems(
            use, allowed, what, observers=self.observers, input_names=self.input_names
        ):
            self.problem(path, message)

    def condition(
        self, path: JsonPath, allowed: frozenset[str] | None = None, what: str = "a condition"
    ) -> Condition | None:
        value = self.get(path, (str, bool))
        if value is None:
            return None
        source = ("true" if value else "false") if isinstance(value, bool) else value
        try:
            cond = compiled_condition(source, self.at(path))
        except TemplateError as exc:
            self.problems.extend(
                Problem(p.location, f"{dotted(path)}: {p.message}") for p in exc.problems
            )
            return None
        allowed = allowed if allowed is not None else self.condition_names
        self._check_names(cond.use, path, allowed, what)
        return cond

    def text(
        self, path: JsonPath, allowed: frozenset[str], what: str, *, shell: bool = False
    ) -> Text | None:
        value = self.get(path, (str, int, float))
        if value is None or isinstance(value, bool):
            return None
        source = str(value)
        try:
            text = compiled_text(source, shell, self.at(path))
        except TemplateError as exc:
            line = syntax_line(source)
            loc = self.doc.text_line(path, line)
            self.problems.extend(Problem(loc, f"{dotted(path)}: {p.message}") for p in exc.problems)
            return None
        self._check_names(text.use, path, allowed, what)
        return text

    def no_claims(self, cond: Condition | None, path: JsonPath) -> None:
        """An agent's report is a claim: it may steer refine rules, never decide done."""
        if cond is not None and "agent" in cond.use.names:
            self.problem(
                path,
                "agent.* is what the agent CLI reported - a claim, not a check; done is "
                "decided by observers (tests, diff, ...): use agent facts in refine rules",
            )

    @property
    def condition_names(self) -> frozenset[str]:
        return frozenset(CONDITION_ENGINE_NAMES | set(self.observers))

    @property
    def message_names(self) -> frozenset[str]:
        return frozenset(ENGINE_NAMES | set(self.observers))

    def duration(self, path: JsonPath) -> float | None:
        value = self.get(path, (str, int, float))
        if value is None:
            return None
        seconds = parse_duration(value)
        if seconds is None and not isinstance(value, bool):
            return None  # the schema reports it
        return seconds

    def protect(self, path: JsonPath) -> Protect:
        """``protect``: a list of globs, or ``{paths: [...], doctests: true, allow_new: [...]}``."""
        raw = self.get(path, (list, dict))
        if raw is None:
            return Protect()
        if isinstance(raw, list):
            return Protect(self._globs(path, raw, "a protected path"))
        return Protect(
            self._globs((*path, "paths"), raw.get("paths"), "a protected path"),
            raw.get("doctests") is True,
            self._globs((*path, "allow_new"), raw.get("allow_new"), "a path new files may take"),
        )

    def _globs(self, path: JsonPath, globs: Any, what: str) -> tuple[Text, ...]:
        """A list of globs that may use ``intent`` and ``inputs``, as messages."""
        texts = []
        for i in range(len(globs) if isinstance(globs, list) else 0):
            text = self.text((*path, i), GOAL_NAMES, what)
            if text is not None:
                texts.append(text)
        return tuple(texts)
