"""``looprun init``: start a team template that extends a built-in one."""

from __future__ import annotations

from pathlib import Path

import click

from looprun.cli.scaffold.files import init_template
from looprun.cli.scaffold.stack_choice import init_stack


@click.command("init")
@click.argument("path")
@click.option(
    "--extends",
    "base",
    default="bugfix",
    show_default=True,
    metavar="NAME",
    help="The built-in template to extend: bugfix, feature, refactor or test_backfill.",
)
@click.option(
    "--stack",
    metavar="NAME",
    help="The stack whose pack the starter is written for (python, go, node, rust, java); "
    "default: the current directory's, else python.",
)
@click.option("--name", help="The template's name (default: from the file name).")
@click.option("--cases", is_flag=True, help="Also write NAME.cases.yaml for `looprun test`.")
@click.option("--force", is_flag=True, help="Overwrite existing files.")
@click.option(
    "--schema",
    metavar="REF",
    help="The $schema reference: a URL, or a schema file (written relative to PATH).",
)
def command(
    path: str,
    base: str,
    stack: str | None,
    name: str | None,
    cases: bool,
    force: bool,
    schema: str | None,
) -> None:
    """Start a team template that extends a built-in one.

    \b
    The file starts with the `# yaml-language-server: $schema=...` line and holds the
    overrides teams usually change (paths, test command, diff size, limits), set to the
    parent's values for the repository's stack (its marker files in the current
    directory, or --stack) and commented; with no stack recognised it is python's, said
    first. It validates as written. Exit 2 if PATH exists (unless --force), --extends
    names no built-in template, the directory has more than one stack and no --stack
    chooses, or the template cannot run on that stack (test_backfill on rust or java).
    """
    chosen = init_stack(Path.cwd(), stack)
    if chosen.note is not None:
        click.echo(chosen.note)
    name_ = chosen.choice.name or "python"
    done = init_template(
        path, base=base, name=name, cases=cases, force=force, schema=schema, stack=name_
    )
    click.echo(
        f"wrote {done.template} (extends {base} for the {name_} stack; schema {done.schema})"
    )
    if done.cases is not None:
        click.echo(f"wrote {done.cases} (check it with: looprun test {done.cases})")
    click.echo(f"next: edit it, then looprun validate {done.template}")
