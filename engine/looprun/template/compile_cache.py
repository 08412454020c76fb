"""Conditions and texts compiled once per distinct source, then placed at each location.

Templates share many messages (built-ins, fragments, sub-loops loaded per outer
template), so compiling is cached by source and only the location is per use. A run
also keeps what compiling gave across processes (:func:`keep_codes`, see
``code_cache``).
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache, partial

from jinja2 import TemplateSyntaxError

from looprun.errors import Location, Problem, TemplateError
from looprun.template.code_cache import CodeCache, Entry
from looprun.template.expressions import (
    ENV,
    Condition,
    NameUse,
    Text,
    compile_condition,
    compile_text,
    condition_of,
    text_of,
)

_NOWHERE = Location("<template>")
_codes: CodeCache | None = None


def keep_codes(cache: CodeCache | None) -> None:
    """From now on, reuse and remember in ``cache`` what compiling gave (None: stop)."""
    global _codes
    _codes = cache
    _compile_text_cached.cache_clear()
    _compile_condition_cached.cache_clear()


def _use(entry: Entry) -> NameUse:
    return NameUse(frozenset(entry[0]), frozenset(entry[1]))


def _entry(use: NameUse, constant: bool | None) -> Entry:
    return (tuple(sorted(use.names)), tuple(sorted(use.attributes)), constant, None)


@lru_cache(maxsize=2048)
def _compile_text_cached(source: str, shell: bool) -> Text:
    codes, kind = _codes, "shell" if shell else "text"
    if codes is None:
        return compile_text(source, _NOWHERE, shell=shell)
    on_code = partial(codes.code, kind, source)
    hit = codes.get(kind, source)
    if hit is not None:
        return text_of(source, _NOWHERE, _use(hit), shell, hit[3], on_code)
    text = compile_text(source, _NOWHERE, shell=shell, on_code=on_code)
    codes.put(kind, source, _entry(text.use, None))
    return text


@lru_cache(maxsize=2048)
def _compile_condition_cached(source: str) -> Condition:
    codes, kind = _codes, "condition"
    if codes is None:
        return compile_condition(source, _NOWHERE)
    on_code = partial(codes.code, kind, source)
    hit = codes.get(kind, source)
    if hit is not None:
        return condition_of(source, _NOWHERE, _use(hit), hit[2], hit[3], on_code)
    condition = compile_condition(source, _NOWHERE, on_code=on_code)
    codes.put(kind, source, _entry(condition.use, condition.constant))
    return condition


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
