"""``looprun schema``: the JSON Schema for templates (or observations)."""

from __future__ import annotations

from pathlib import Path

import click

from looprun.system.atomic import write_atomic
from looprun.system.resources import schema_path


@click.command("schema")
@click.option("--observation", is_flag=True, help="The observation schema instead.")
@click.option(
    "--output",
    "-o",
    metavar="FILE",
    help="Write it to FILE (for editors; point `--schema` of `looprun init` at it).",
)
def command(observation: bool, output: str | None) -> None:
    """Print (or write) the JSON Schema for templates, for editors and CI."""
    text = schema_path("observation" if observation else "template").read_text("utf-8")
    if output is None:
        click.echo(text, nl=False)
        return
    write_atomic(Path(output), text)
    click.echo(f"wrote {output}")
