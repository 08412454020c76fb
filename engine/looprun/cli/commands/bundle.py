"""``looprun bundle``: pack a run so another clone can resume it."""

from __future__ import annotations

from pathlib import Path

import click

from looprun.journal.bundle import create_bundle


@click.command("bundle")
@click.argument("run_id")
@click.option("--workdir", default=".", show_default=True, help="The repository of the run.")
@click.option("--output", "-o", metavar="FILE", help="Where to write it (default RUN_ID.looprun).")
def command(run_id: str, workdir: str, output: str | None) -> None:
    """Pack a run (its directory and checkpoint refs) so another clone can resume it:
    `looprun resume --bundle FILE` there."""
    path = create_bundle(Path(workdir).resolve(), run_id, Path(output) if output else None)
    click.echo(str(path))
