"""``looprun explain``: a template after composition, with its refine tree."""

from __future__ import annotations

import click

from looprun.template.explain import explain
from looprun.template.loader import load_template


@click.command("explain")
@click.argument("template")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "mermaid", "json"]),
    default="text",
    show_default=True,
    help="text: resolved template and tree; mermaid: flowchart; json: resolved document.",
)
def command(template: str, fmt: str) -> None:
    """Show a template after composition, with its refine tree drawn."""
    click.echo(explain(load_template(template), fmt))
