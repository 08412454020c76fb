"""Which cases of a ``looprun test`` case file two templates decide differently, each
decision computed by the engine's own code, as ``looprun test`` computes it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from looprun.cli.cases.evaluate import Outcome, describe, evaluate
from looprun.cli.cases.load import Case, load_cases
from looprun.errors import TemplateError
from looprun.template.diff import CaseChange
from looprun.template.model import Template


def _decided(outcome: Outcome) -> str:
    if outcome.error:
        return f"error: {outcome.error}"
    assert outcome.decision is not None
    holds = all(ok for _, ok in outcome.exit_values)
    return f"{describe(outcome.decision)}; exit {'holds' if holds else 'does not hold'}"


def _cases(path: Path, old: Template, new: Template) -> list[Case]:
    """The file's cases, checked against the new template (else the old one: a case
    about a rule the change removed is still a case)."""
    try:
        return load_cases(path, new)
    except TemplateError as first:
        try:
            return load_cases(path, old)
        except TemplateError:
            raise first from None


def changed_cases(case_files: Sequence[str], old: Template, new: Template) -> list[CaseChange]:
    """Every case whose decision (rule, action, target, message, exit) differs."""
    out: list[CaseChange] = []
    for name in case_files:
        for case in _cases(Path(name), old, new):
            before, after = _decided(evaluate(case, old)), _decided(evaluate(case, new))
            if before != after:
                out.append(CaseChange(case.name, str(case.location), before, after))
    return out
