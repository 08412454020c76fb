"""Conditions and texts compiled once per distinct source, then placed at each location.

Templates share many messages (built-ins, fragments, sub-loops loaded per outer
template), so compiling is cached by source and only the location is per use.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache

from jinja2 import TemplateSyntaxError

from looprun.errors import Location, Problem, TemplateError
from looprun.template.expressions import (
    ENV,
    Condition,
    Text,
    compile_condition,
    compile_text,
)

_NOWHERE = Location("<template>")


@lru_cache(maxsize=2048)
def _compile_text_cached(source: str, shell: bool) -> Text:
    return compile_text(source, _NOWHERE, shell=shell)


@lru_cache(maxsize=2048)
def _compile_condition_cached(source: str) -> Condition:
    return compile_condition(source, _NOWHERE)


def _relocate(problems: tuple[Problem, ...], where: Location) -> TemplateError:
    return TemplateError([Problem(where, p.message) for p in problems])


def compiled_text(source: str, shell: bool, where: Location) -> Text:
    """compile_text, compiled once per distinct source (templates share many messages)."""
    try:
        return dataclasses.replace(_compile_text_cached(source, shell), location=where)
    except TemplateError as exc:
        raise _relocate(exc.problems, where) from None


def compiled_condition(source: str, where: Location) -> Condition:
    """compile_condition, compiled once per distinct source."""
    try:
        return dataclasses.replace(_compile_condition_cached(source), location=where)
    except TemplateError as exc:
        raise _relocate(exc.problems, where) from None


def syntax_line(source: str) -> int:
    """The line of a text's syntax error (1 when there is none), to locate it in a block."""
    try:
        ENV.parse(source)
    except TemplateSyntaxError as exc:
        return exc.lineno or 1
    return 1
