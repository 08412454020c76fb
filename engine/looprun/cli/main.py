"""The command line: ``looprun TEMPLATE --intent ...`` runs a loop; subcommands validate,
explain, observe, resume and list runs. This is the one place that touches argv, the
environment and the terminal.

Each subcommand is a module of ``commands/``, imported only when it is the one invoked
(click's lazy-loading group): ``looprun --help`` and ``looprun runs`` start without the
template language, the schema validator or the HTTP client. ``COMMANDS`` holds each
one's short help for ``looprun --help``, so listing them imports none.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, NamedTuple

import click

from looprun import __version__
from looprun.checks.stacks.detect import ambient
from looprun.cli.boundary import error_boundary
from looprun.cli.terminal import guard_streams
from looprun.system.abandon import exit_now_if_abandoned, exit_without_teardown
from looprun.template import slots


class Entry(NamedTuple):
    """A subcommand: the module that defines it (as ``command``) and its short help."""

    module: str
    short_help: str


# name -> where it is defined and the line `looprun --help` shows (tests/cli holds it
# in step with the command's own docstring)
COMMANDS: dict[str, Entry] = {
    "bundle": Entry(
        "looprun.cli.commands.bundle",
        "Pack a run (its directory and checkpoint refs) so another clone can resume it: "
        "`looprun resume --bundle FILE` there.",
    ),
    "completion": Entry(
        "looprun.cli.commands.completion",
        "Print the shell completion script for bash, zsh or fish.",
    ),
    "diff": Entry(
        "looprun.cli.commands.diff",
        "Say what a template change does: rules, limits, policy, observers, cases.",
    ),
    "explain": Entry(
        "looprun.cli.commands.explain",
        "Show a template after composition, with its refine tree drawn.",
    ),
    "gc": Entry(
        "looprun.cli.commands.gc",
        "Prune the checkpoint refs (refs/looprun/...) of runs whose directory was deleted.",
    ),
    "init": Entry(
        "looprun.cli.commands.init", "Start a team template that extends a built-in one."
    ),
    "lock": Entry(
        "looprun.cli.commands.lock",
        "Pin the remote references of TEMPLATES (default: those the lock lists) in "
        "looprun.lock: each one's commit and the sha256 of every file read.",
    ),
    "observe": Entry(
        "looprun.cli.commands.observe",
        "Parse a report (or a command's output) and print the observation as JSON.",
    ),
    "report": Entry(
        "looprun.cli.commands.report",
        "Write a run's report: intent, plan, each iteration (tools, files, checks, the rule "
        "that fired, the decision, the diff), tokens and cost, limits, outcome.",
    ),
    "resume": Entry(
        "looprun.cli.commands.resume",
        "Continue a run after a crash, a kill or an approval pause, from its last step.",
    ),
    "run": Entry(
        "looprun.cli.commands.run",
        "Run a loop template until its exit conditions hold or a limit stops it.",
    ),
    "runs": Entry(
        "looprun.cli.commands.runs", "List the runs in a repository with their outcomes."
    ),
    "schema": Entry(
        "looprun.cli.commands.schema",
        "Print (or write) the JSON Schema for templates, for editors and CI.",
    ),
    "test": Entry(
        "looprun.cli.commands.test",
        "Unit-test a template's decisions: given these facts, this rule fires.",
    ),
    "update": Entry(
        "looprun.cli.commands.update",
        "Move the remote references in the lock's templates forward (REF: only the "
        "references whose git+URL@REF or URL starts with it): a tag to the newest tag, a "
        "branch to its new head.",
    ),
    "validate": Entry(
        "looprun.cli.commands.validate",
        "Validate templates, fragments and case files; a directory: the looprun files in it.",
    ),
}


class _LazyGroup(click.Group):
    """The subcommands of ``COMMANDS``, each imported on first use (click's documented
    lazy-loading pattern); the listing in ``--help`` comes from the table."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        command = importlib.import_module(entry.module).command
        assert isinstance(command, click.Command), entry.module
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """As click's, from the table's short help: listing imports no command."""
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        rows = [  # shortened to fit as click shortens a command's own help
            (name, click.Command(name, help=COMMANDS[name].short_help).get_short_help_str(limit))
            for name in self.list_commands(ctx)
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _until_run(args: list[str]) -> bool:
    """``looprun --until CMD ...`` (the options in any order) is a run without a template;
    ``--help`` and ``--version`` stay the group's."""
    if args[0] in ("-h", "--help", "--version"):
        return False
    return any(a == "--until" or a.startswith("--until=") for a in args)


class _DefaultToRun(_LazyGroup):
    """``looprun TEMPLATE ...`` is short for ``looprun run TEMPLATE ...``; and the one
    error boundary around every subcommand."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in COMMANDS and (not args[0].startswith("-") or _until_run(args)):
            args = ["run", *args]
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            with error_boundary(), slots.chosen(ambient(Path.cwd())):
                result = super().invoke(ctx)
        except SystemExit as exc:  # a frozen Ray head would hold Ray's exit handler
            exit_now_if_abandoned(exc.code)
            raise
        exit_now_if_abandoned(0)
        return result


@click.group(cls=_DefaultToRun, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="looprun")
def main() -> None:
    """Declarative loop templates for AI coding agents.

    \b
    looprun TEMPLATE --intent TEXT    run a template (a path or a built-in name)
    looprun --until CMD --intent TEXT run until CMD exits 0, no template needed
    looprun validate PATH...          check templates; every problem as file:line:col
    looprun explain TEMPLATE          show the resolved template and its refine tree
    looprun test TEMPLATE CASES...    check which rule fires for given facts
    looprun init PATH                 start a team template extending a built-in one
    """
    guard_streams()  # model and tool text reach the terminal: no escapes, no secrets


def entry() -> None:
    """The ``looprun`` command: :func:`main`, then the process ends without the
    interpreter's teardown (``python -m looprun`` keeps the usual exit, so a caller that
    runs it in its own interpreter gets control back)."""
    try:
        main()
    except SystemExit as exc:
        exit_without_teardown(exc.code)
