"""The full check of one file: a template, a fragment or a ``looprun test`` case file,
each through the language's own loader, so what passes here is what a run accepts."""

from __future__ import annotations

from pathlib import Path

from looprun.cli.cases.load import load_cases, template_of
from looprun.errors import Problem, TemplateError
from looprun.template.build.builder import Builder
from looprun.template.compose import FRAGMENT_KEYS, compose
from looprun.template.loader import load_template
from looprun.template.schema_check import schema_problems
from looprun.template.yamlpos import load_document

_NOT_IN_FRAGMENTS = ("name", "extends", "plan", "each_task")


def _is_fragment(path: Path) -> bool:
    """A file without a name that holds only fragment keys (observer packs, input sets)."""
    try:
        data = load_document(path).data
    except TemplateError:
        return False
    # a pack may hold act constraints; an `act` with a prompt is a template's own
    act = data.get("act") if isinstance(data, dict) else None
    return (
        isinstance(data, dict)
        and not any(k in data for k in _NOT_IN_FRAGMENTS)
        and not (isinstance(act, dict) and "prompt" in act)
        and any(k in data for k in FRAGMENT_KEYS)
    )


def check_fragment(path: Path) -> list[Problem]:
    """Validate a fragment on its own: composition, schema (minus template-only keys), observers."""
    doc = compose(path, fragment=True)
    problems = [p for p in schema_problems(doc) if not p.message.startswith("missing required key")]
    builder = Builder(doc)
    builder.inputs()
    builder.observe()
    return [*problems, *builder.problems]


def _is_case_file(path: Path) -> bool:
    """A `looprun test` case file: a mapping with `cases` and no template keys."""
    try:
        data = load_document(path).data
    except TemplateError:
        return False
    return isinstance(data, dict) and "cases" in data and "looprun" not in data


def check_case_file(path: Path) -> list[Problem]:
    """A case file is valid when its template loads and every case fits that template."""
    load_cases(path, load_template(template_of(str(path))))
    return []


def check_file(ref: str) -> list[Problem]:
    """Every problem in one template, fragment or case file (empty when it is valid)."""
    path = Path(ref)
    try:
        if path.is_file() and _is_case_file(path):
            return check_case_file(path)
        if path.is_file() and _is_fragment(path):
            return check_fragment(path)
        load_template(ref)
    except TemplateError as exc:
        return list(exc.problems)
    return []


def is_case_file(ref: str) -> bool:
    """A file holding `looprun test` cases (``cases:`` at the top level)."""
    path = Path(ref)
    return path.is_file() and path.suffix in (".yaml", ".yml") and _is_case_file(path)
