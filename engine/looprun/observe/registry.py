"""Parser registry: built-in parsers by name, third-party ones via entry points.

Fact names and empty facts come from ``declared_facts``, so validating a template never
imports parser modules. Third-party parsers register in the ``looprun.parsers``
entry-point group, read (``importlib.metadata``, slow to import) only when a name is not
a built-in one.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from functools import cache
from types import MappingProxyType
from typing import Any

from looprun.errors import LooprunError
from looprun.observe import declared_facts
from looprun.observe.base import Parser

ENTRY_POINT_GROUP = "looprun.parsers"

# name -> (import path, fact names beyond the common ones)
BUILTIN: dict[str, tuple[str, frozenset[str]]] = {
    "junit": ("looprun.observe.junit:JUnitParser", frozenset(declared_facts.JUNIT)),
    "node_test": ("looprun.observe.node_test:NodeTestParser", frozenset(declared_facts.JUNIT)),
    "surefire": ("looprun.observe.surefire:SurefireParser", frozenset(declared_facts.JUNIT)),
    "sarif": ("looprun.observe.sarif:SarifParser", frozenset(declared_facts.SARIF)),
    "coverage": ("looprun.observe.coverage:CoverageParser", frozenset(declared_facts.COVERAGE)),
    "git_diff": ("looprun.observe.git_diff:GitDiffParser", frozenset(declared_facts.GIT_DIFF)),
    "exit_code": (
        "looprun.observe.exit_code:ExitCodeParser",
        frozenset(declared_facts.EXIT_CODE),
    ),
    "regex": ("looprun.observe.regex:RegexParser", frozenset(declared_facts.REGEX)),
    "json": ("looprun.observe.json_facts:JsonParser", frozenset()),  # facts named by options
    "diagnostics": (
        "looprun.observe.diagnostics:DiagnosticsParser",
        frozenset(declared_facts.DIAGNOSTICS),
    ),
    "go_test": ("looprun.observe.gotest:GoTestParser", frozenset(declared_facts.JUNIT)),
    "cargo_test": ("looprun.observe.cargo_test:CargoTestParser", frozenset(declared_facts.JUNIT)),
    "cargo_diagnostics": (
        "looprun.observe.cargo_diagnostics:CargoDiagnosticsParser",
        frozenset(declared_facts.DIAGNOSTICS),
    ),
}


# name -> the facts it gives before parsing anything (each parser's own ``empty_facts``)
_EMPTY: dict[str, Mapping[str, Any]] = {
    "junit": declared_facts.JUNIT,
    "node_test": declared_facts.JUNIT,
    "surefire": declared_facts.JUNIT,
    "sarif": declared_facts.SARIF,
    "coverage": declared_facts.COVERAGE,
    "git_diff": declared_facts.GIT_DIFF,
    "exit_code": declared_facts.EXIT_CODE,
    "regex": declared_facts.REGEX,
    "json": MappingProxyType({}),
    "diagnostics": declared_facts.DIAGNOSTICS,
    "go_test": declared_facts.JUNIT,
    "cargo_test": declared_facts.JUNIT,
    "cargo_diagnostics": declared_facts.DIAGNOSTICS,
}


class UnknownParser(LooprunError):
    """A template or plugin names a parser that is not registered."""


@cache
def _entry_points() -> dict[str, object]:
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def parser_names() -> list[str]:
    return sorted(set(BUILTIN) | set(_entry_points()))


def is_parser(name: str) -> bool:
    """A built-in parser's name, or an installed plugin's (plugins are looked up only
    for a name that is not built in)."""
    return name in BUILTIN or name in _entry_points()


def declared_empty_facts(name: str) -> Mapping[str, Any] | None:
    """A built-in parser's empty facts, without importing it; None for any other name."""
    return _EMPTY.get(name)


def parser_facts(name: str, options: object = None) -> frozenset[str] | None:
    """Fact names a parser provides beyond the common ones (with these options, where they
    matter: a regex preset that is not pytest has no test counts); None if undeclared."""
    by_options = declared_facts.preset_facts(name, options)
    if by_options is not None:
        return frozenset(by_options)
    if name in BUILTIN:
        return BUILTIN[name][1]
    return None


def option_problems(name: str, options: object) -> list[tuple[str, str, bool]]:
    """What is wrong with a built-in parser's options: (option, message, the name is wrong).

    Third-party parsers declare no options, so theirs are not checked.
    """
    known = declared_facts.OPTIONS.get(name)
    if known is None or not isinstance(options, dict):
        return []
    known = known | declared_facts.COMMON_OPTIONS
    out: list[tuple[str, str, bool]] = []
    for key, value in options.items():
        if key not in known:
            names = ", ".join(sorted(known))
            out.append(
                (str(key), f"parser '{name}' has no option '{key}' (options: {names})", True)
            )
            continue
        allowed = declared_facts.OPTION_VALUES.get((name, str(key)))
        if allowed is not None and value is not None and value not in allowed:
            message = f"option '{key}' must be one of {', '.join(allowed)}, not {value!r}"
            out.append((str(key), message, False))
    return out


def get_parser(name: str) -> Parser:
    if name in BUILTIN:
        module, _, attr = BUILTIN[name][0].partition(":")
        return getattr(importlib.import_module(module), attr)()
    ep = _entry_points().get(name)
    if ep is None:
        raise UnknownParser(f"unknown parser {name!r}; known: {', '.join(parser_names())}")
    obj = ep.load()  # type: ignore[attr-defined]
    return obj() if isinstance(obj, type) else obj


def empty_facts_of(name: str) -> dict[str, Any]:
    """The empty facts of the parser named ``name``: a built-in's without importing it (a
    skipped check need not load its parser), a plugin's from the plugin. Raises
    UnknownParser for a name no parser has."""
    declared = _EMPTY.get(name)
    return dict(declared) if declared is not None else empty_facts(get_parser(name))


def empty_facts(parser: Parser) -> dict[str, Any]:
    """The facts ``parser`` gives before it has parsed anything: each declared fact with
    its empty value. ``empty_facts`` is optional for plugins; one without has none."""
    facts = getattr(parser, "empty_facts", None)
    return dict(facts) if isinstance(facts, Mapping) else {}
