"""Load a template by path or built-in name: compose, validate, build. All or nothing.

``load_template`` either returns a complete, immutable Template or raises one
TemplateError carrying every problem found, each located in the file it sits in.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from looprun.errors import Location, Problem, TemplateError
from looprun.system.resources import builtin_template
from looprun.template.build.builder import Builder
from looprun.template.compose import Source, _all_builtins, compose, display
from looprun.template.model import Template
from looprun.template.schema_check import schema_problems
from looprun.template.suggest import did_you_mean

MAX_SUBLOOP_DEPTH = 8


def locate(ref: str | Path) -> Path:
    """The file a reference names: an existing path, else a built-in template name."""
    path = Path(ref).expanduser()
    if path.exists() or isinstance(ref, Path):
        return path
    builtin = builtin_template(str(ref).removesuffix(".yaml").removesuffix(".yml"))
    if builtin is not None:
        return builtin
    return path


def load_template(
    ref: str | Path, given: Mapping[str, Any] | None = None, *, schema: bool = True
) -> Template:
    """Load, compose and validate a template; raise TemplateError with every problem.

    ``given``: input values (from ``--set``) that numbers written as ``{{ inputs.NAME }}``
    take instead of the inputs' defaults. ``schema=False`` skips the JSON Schema check
    (and the validator's import): only for files known to have passed it unchanged."""
    path = locate(ref)
    if not path.exists() and not isinstance(ref, Path):
        name = str(ref)
        hint = (
            ""
            if "/" in name or name.endswith((".yaml", ".yml"))
            else did_you_mean(name, _all_builtins())
        )
        raise TemplateError(
            [Problem(Location(display(path), 1, 1), f"no such file or built-in template{hint}")]
        )
    return _load(path, (), given, schema)


def _load(
    path: Source,
    outer: tuple[Source, ...],
    given: Mapping[str, Any] | None = None,
    schema: bool = True,
) -> Template:
    doc = compose(path)
    problems: list[Problem] = []
    if schema:
        problems.extend(schema_problems(doc))
    here = path.resolve()
    chain = (*outer, here)

    def sub_loader(target: Source, at: Location) -> Template:
        if target.resolve() in chain:
            names = " -> ".join(display(p) for p in (*chain, target.resolve()))
            raise TemplateError([Problem(at, f"each_task.uses cycle: {names}")])
        if len(chain) >= MAX_SUBLOOP_DEPTH:
            raise TemplateError([Problem(at, f"sub-loops nested deeper than {MAX_SUBLOOP_DEPTH}")])
        return _load(target, chain, schema=schema)

    builder = Builder(doc, sub_loader, given)
    try:
        template = builder.build()
    except Exception:
        if not problems:
            raise
        template = None  # the schema already explains why the data could not be built
    problems.extend(builder.problems)
    if problems or template is None:
        raise TemplateError(_dedupe(problems))
    return template


def _dedupe(problems: list[Problem]) -> list[Problem]:
    seen: set[tuple[str, int, int, str]] = set()
    out = []
    for p in problems:
        key = (p.location.file, p.location.line, p.location.col, p.message)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out
