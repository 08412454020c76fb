"""Running case files: every case of every file against its template, a PASS or FAIL
line each (with what fired and why, on a failure), and the exit status."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from looprun.cli.cases.evaluate import describe, evaluate
from looprun.cli.cases.load import Case, load_cases, template_of
from looprun.errors import EXIT_DONE, EXIT_ERROR, Problem, TemplateError
from looprun.template.loader import load_template
from looprun.template.model import Template

Echo = Callable[..., None]


def run_case_files(
    case_files: Sequence[str], template_ref: str | None = None, echo: Echo = print
) -> int:
    """Run every case of every file, against ``template_ref`` or each file's own
    ``template:``; 0 when all pass, 1 when any fails. Bad files raise TemplateError."""
    if template_ref is not None:
        return run_cases(template_ref, case_files, echo)
    problems: list[Problem] = []
    loaded = []
    for f in case_files:
        try:
            template = load_template(template_of(f))
            loaded.append((template, load_cases(Path(f), template)))
        except TemplateError as exc:
            problems.extend(exc.problems)
    if problems:
        raise TemplateError(problems)
    return _run(loaded, echo)


def run_cases(template_ref: str | None, case_files: Sequence[str], echo: Echo = print) -> int:
    """Run every case; 0 when all pass, 1 when any fails. Bad files raise TemplateError."""
    template = load_template(template_ref or template_of(case_files[0]))
    return _run([(template, load_cases(Path(f), template)) for f in case_files], echo)


def _run(loaded: Sequence[tuple[Template, list[Case]]], echo: Echo) -> int:
    passed = failed = 0
    for template, cases in loaded:
        for case in cases:
            result = evaluate(case, template)
            if result.passed:
                passed += 1
                echo(f"PASS {case.name}")
                continue
            failed += 1
            echo(f"FAIL {case.name} ({case.location})")
            if result.error:
                echo(f"  error: {result.error}")
            for line in result.mismatches:
                echo(f"  {line}")
            if result.decision is not None:
                echo(f"  fired: {describe(result.decision)}")
                for src, ok in result.exit_values:
                    echo(f"  exit {'holds' if ok else 'fails'}: {src}")
    echo(f"{passed} passed, {failed} failed")
    return EXIT_ERROR if failed else EXIT_DONE
