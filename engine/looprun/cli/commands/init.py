"""``looprun init``: start a team template that extends a built-in one."""

from __future__ import annotations

import click

from looprun.cli.scaffold.files import init_template


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
@click.option("--name", help="The template's name (default: from the file name).")
@click.option("--cases", is_flag=True, help="Also write NAME.cases.yaml for `looprun test`.")
@click.option("--force", is_flag=True, help="Overwrite existing files.")
@click.option(
    "--schema",
    metavar="REF",
    help="The $schema reference: a URL, or a schema file (written relative to PATH).",
)
def command(
    path: str, base: str, name: str | None, cases: bool, force: bool, schema: str | None
) -> None:
    """Start a team template that extends a built-in one.

    \b
    The file starts with the `# yaml-language-server: $schema=...` line and holds the
    overrides teams usually change (paths, test command, diff size, limits), set to the
    parent's values and commented. It validates as written. Exit 2 if PATH exists
    (unless --force) or --extends names no built-in template.
    """
    done = init_template(path, base=base, name=name, cases=cases, force=force, schema=schema)
    click.echo(f"wrote {done.template} (extends {base}; schema {done.schema})")
    if done.cases is not None:
        click.echo(f"wrote {done.cases} (check it with: looprun test {done.cases})")
    click.echo(f"next: edit it, then looprun validate {done.template}")
