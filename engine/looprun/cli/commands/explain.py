"""``looprun explain``: a template after composition, with its refine tree."""

from __future__ import annotations

import click

from looprun.cli.validation.validate import provenance
from looprun.template.explain import explain
from looprun.template.loader import load_template
from looprun.template.sharing.resolver import session


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
    with session() as resolvers:
        loaded = load_template(template)
    click.echo(explain(loaded, fmt))
    remote = provenance(resolvers.values())
    if remote and fmt == "text":  # json and mermaid stay what tools parse
        click.echo("remote parts:")
        for line in remote:
            click.echo(f"  {line}")
