"""``looprun observe``: try a parser on a report or a command's output."""

from __future__ import annotations

import sys

import click

from looprun.cli.try_parser import observe


@click.command("observe")
@click.argument("parser")
@click.argument("file", required=False)
@click.option("--run", "run", metavar="COMMAND", help="Run this shell command first, then parse.")
@click.option("--file", "file_opt", metavar="REPORT", help="The report the command writes.")
@click.option(
    "--option",
    "-o",
    "options",
    multiple=True,
    metavar="KEY=VALUE",
    help="A parser option; VALUE is JSON or a string; repeat a key for a list.",
)
@click.option("--workdir", default=".", show_default=True, help="Where to run and resolve paths.")
@click.option("--timeout", type=float, default=600.0, show_default=True, help="Seconds for --run.")
@click.option("--base", help="git_diff: the commit or tree to diff against (default HEAD).")
@click.option(
    "--sandbox",
    type=click.Choice(["auto", "required", "off"]),
    default="auto",
    show_default=True,
    help="Run --run in an OS sandbox (the workdir and a private temp dir writable).",
)
@click.option("--network", is_flag=True, help="Let the sandboxed command use the network.")
def command(
    parser: str,
    file: str | None,
    run: str | None,
    file_opt: str | None,
    options: tuple[str, ...],
    workdir: str,
    timeout: float,
    base: str | None,
    sandbox: str,
    network: bool,
) -> None:
    """Parse a report (or a command's output) and print the observation as JSON.

    Exit 0 when the observation is ok, 1 when it is not, 2 for usage errors.
    """
    if file and file_opt and file != file_opt:
        raise click.UsageError("give the report once: FILE or --file")
    text, code = observe(
        parser,
        file or file_opt,
        run,
        options,
        workdir=workdir,
        timeout_s=timeout,
        base=base,
        sandbox=sandbox,
        network=network,
    )
    click.echo(text)
    sys.exit(code)
