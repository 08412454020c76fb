"""Parser registry: built-in parsers by name, third-party ones via entry points.

Fact names are declared here so validating a template never imports parser modules.
Third-party parsers register in the ``looprun.parsers`` entry-point group.
"""

from __future__ import annotations

import importlib
from functools import cache

from looprun.errors import LooprunError
from looprun.observe.base import Parser

ENTRY_POINT_GROUP = "looprun.parsers"

# name -> (import path, fact names beyond the common ones)
BUILTIN: dict[str, tuple[str, frozenset[str]]] = {
    "junit": (
        "looprun.observe.junit:JUnitParser",
        frozenset({"tests", "passed", "failed", "errors", "skipped", "failing", "flaky"}),
    ),
    "sarif": (
        "looprun.observe.sarif:SarifParser",
        frozenset({"errors", "warnings", "notes", "total", "rules", "files", "tool_errors"}),
    ),
    "coverage": (
        "looprun.observe.coverage:CoverageParser",
        frozenset(
            {
                "percent",
                "branch_percent",
                "lines_valid",
                "lines_covered",
                "files",
                "target_percent",
                "targets",
            }
        ),
    ),
    "git_diff": (
        "looprun.observe.git_diff:GitDiffParser",
        frozenset(
            {
                "files_changed",
                "added",
                "removed",
                "lines",
                "files",
                "outside",
                "forbidden",
                "binary",
                "files_added",
                "files_deleted",
            }
        ),
    ),
    "exit_code": (
        "looprun.observe.exit_code:ExitCodeParser",
        frozenset({"output_tail", "timed_out"}),
    ),
    "regex": (
        "looprun.observe.regex:RegexParser",
        frozenset(
            {
                "errors",
                "warnings",
                "notes",
                "total",
                # the pytest preset also reports test counts
                "tests",
                "passed",
                "failed",
                "skipped",
                "failing",
            }
        ),
    ),
    "json": ("looprun.observe.json_facts:JsonParser", frozenset()),  # facts named by options
}


class UnknownParser(LooprunError):
    pass


@cache
def _entry_points() -> dict[str, object]:
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def parser_names() -> list[str]:
    return sorted(set(BUILTIN) | set(_entry_points()))


def parser_facts(name: str) -> frozenset[str] | None:
    """Fact names a parser provides beyond the common ones; None if it does not declare them."""
    if name in BUILTIN:
        return BUILTIN[name][1]
    return None


def get_parser(name: str) -> Parser:
    if name in BUILTIN:
        module, _, attr = BUILTIN[name][0].partition(":")
        return getattr(importlib.import_module(module), attr)()
    ep = _entry_points().get(name)
    if ep is None:
        raise UnknownParser(f"unknown parser {name!r}; known: {', '.join(parser_names())}")
    obj = ep.load()  # type: ignore[attr-defined]
    return obj() if isinstance(obj, type) else obj
