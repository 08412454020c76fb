"""``looprun explain``: a template after composition, with its refine tree."""

from __future__ import annotations

from pathlib import Path

import click

from looprun.checks.stacks.detect import detect
from looprun.checks.stacks.detect import given as given_stack
from looprun.cli.validation.validate import provenance
from looprun.template import slots
from looprun.template.explain import explain
from looprun.template.loader import load_template
from looprun.template.sharing.resolver import session


@click.command("explain")
@click.argument("template")
@click.option(
    "--workdir",
    default=None,
    help="The repository whose stack picks the pack (default: the current directory).",
)
@click.option("--set", "sets", multiple=True, metavar="stack=NAME", help="Choose the stack.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "mermaid", "json"]),
    default="text",
    show_default=True,
    help="text: resolved template and tree; mermaid: flowchart; json: resolved document.",
)
def command(template: str, fmt: str, workdir: str | None, sets: tuple[str, ...]) -> None:
    """Show a template after composition, with its refine tree drawn.

    Also names the stack whose pack it composed, and why that stack."""
    choice = slots.current()
    given = dict(s.split("=", 1) for s in sets if "=" in s)
    if given.get("stack"):
        choice = given_stack(given["stack"])
    elif workdir is not None:
        choice = detect(Path(workdir))
    with session() as resolvers, slots.chosen(choice) as composed:
        loaded = load_template(template)
    choice = composed.choice or choice  # a template that includes a pack pins its stack
    click.echo(explain(loaded, fmt))
    packs = sorted({spec.stack for spec in loaded.observe.values() if spec.stack})
    if packs and fmt == "text":
        click.echo(f"stack: {', '.join(packs)} ({choice.why})")
    remote = provenance(resolvers.values())
    if remote and fmt == "text":  # json and mermaid stay what tools parse
        click.echo("remote parts:")
        for line in remote:
            click.echo(f"  {line}")
