"""``looprun runs``: the runs in a repository."""

from __future__ import annotations

import sys

import click

from looprun.run.listing import runs_from_cli


@click.command("runs")
@click.option("--workdir", default=".", show_default=True, help="The repository to look in.")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def command(workdir: str, as_json: bool) -> None:
    """List the runs in a repository with their outcomes."""
    sys.exit(runs_from_cli(workdir=workdir, as_json=as_json))
