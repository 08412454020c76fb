"""``looprun test``: a template's decisions checked against case files."""

from __future__ import annotations

import sys

import click

from looprun.cli.cases.run import run_case_files
from looprun.cli.validation.check import is_case_file


@click.command("test")
@click.argument("args", nargs=-1, required=True, metavar="[TEMPLATE] CASES...")
def command(args: tuple[str, ...]) -> None:
    """Unit-test a template's decisions: given these facts, this rule fires.

    \b
    Each case in CASES (YAML) gives one iteration's facts and what must follow:
    the refine rule that fires (its position, as `looprun explain` numbers it),
    the action, its rendered message, whether the exit conditions hold.
    With one argument, the case file names its template (`template:`).
    With case files only, each names its own template (`template:`).
    Exit 0 when every case passes, 1 when one fails, 2 for an invalid file.
    """
    if all(is_case_file(a) for a in args):
        sys.exit(run_case_files(args, echo=click.echo))
    template, cases = (None, args) if len(args) == 1 else (args[0], args[1:])
    sys.exit(run_case_files(cases, template, echo=click.echo))
