"""``looprun validate``: check templates, fragments and case files."""

from __future__ import annotations

import os
import sys

import click

from looprun.cli.terminal import in_actions, workflow_command
from looprun.cli.validation.validate import validate
from looprun.template.valid_cache import ValidCache, default_dir


@click.command("validate")
@click.argument("paths", nargs=-1, required=True)
@click.option("-q", "--quiet", is_flag=True, help="Print problems only, not the OK lines.")
@click.option(
    "--skip-other",
    is_flag=True,
    help="Skip YAML files that are not looprun's (no `looprun:` key, not a case file).",
)
@click.option(
    "--no-cache",
    is_flag=True,
    help="Check every file in full, not trusting files found valid before "
    "($XDG_CACHE_HOME/looprun/valid).",
)
def command(paths: tuple[str, ...], quiet: bool, skip_other: bool, no_cache: bool) -> None:
    """Validate templates, fragments and case files; a directory: the looprun files in
    it. Exit 0 if all are valid, 2 if any is not.

    A file found valid is remembered with the content of every file it read; while none
    of them (nor looprun) changes, it is not checked again.

    In GitHub Actions (GITHUB_ACTIONS=true) each problem is also written as an
    `::error file=...,line=...,col=...::` annotation."""
    sys.exit(
        validate(
            paths,
            quiet=quiet,
            echo=click.echo,
            command=workflow_command,
            skip_other=skip_other,
            annotate=in_actions(),  # annotate the pull request
            workspace=os.environ.get("GITHUB_WORKSPACE"),
            cache=None if no_cache else ValidCache(default_dir()),
        )
    )
