"""``looprun report``: a run's report as Markdown, HTML or JSON."""

from __future__ import annotations

from pathlib import Path

import click

from looprun.report import render, report_for
from looprun.system.atomic import write_atomic


@click.command("report")
@click.argument("run_id")
@click.option("--workdir", default=".", show_default=True, help="The repository of the run.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["md", "html", "json"]),
    default="md",
    show_default=True,
    help="md: for a PR comment or a CI summary; html: one self-contained file; json.",
)
@click.option("--output", "-o", metavar="FILE", help="Write the report here, not to stdout.")
@click.option(
    "--max-chars",
    type=click.IntRange(min=2000),
    help="md only: the bound on its length (default 60000); what is cut is said.",
)
def command(run_id: str, workdir: str, fmt: str, output: str | None, max_chars: int | None) -> None:
    """Write a run's report: intent, plan, each iteration (tools, files, checks, the rule
    that fired, the decision, the diff), tokens and cost, limits, outcome."""
    text = render(report_for(Path(workdir), run_id), fmt, max_chars=max_chars)
    if output is None:
        click.echo(text, nl=False)
        return
    write_atomic(Path(output), text)
    click.echo(f"wrote {output}", err=True)
