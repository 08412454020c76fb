"""``looprun lock``: pin every remote template reference (commit and file digests) in
``looprun.lock`` at the repository root."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from looprun.errors import EXIT_INVALID, Location, Problem, TemplateError
from looprun.template.sharing import lockfile
from looprun.template.sharing.load import load_all
from looprun.template.sharing.resolver import Resolver


@click.command("lock")
@click.argument("templates", nargs=-1)
@click.option(
    "--refresh",
    "refresh",
    multiple=True,
    metavar="REF",
    help="Pin this reference (git+URL@REF, as the lock names it) anew: a branch's new "
    "head, a tag that was moved. Repeatable.",
)
def command(templates: tuple[str, ...], refresh: tuple[str, ...]) -> None:
    """Pin the remote references of TEMPLATES (default: those the lock lists) in
    looprun.lock: each one's commit and the sha256 of every file read. References
    already pinned stay as they are, unless named by --refresh."""
    root = lockfile.find_root(Path(templates[0]).absolute().parent if templates else Path.cwd())
    resolver = Resolver(root, locking=True, refresh=frozenset(refresh))
    names = list(templates) or [str(root / t) for t in resolver.lock.templates]
    if not names:
        raise TemplateError(
            [Problem(Location(str(root / lockfile.NAME)), "no templates to lock: name them")]
        )
    problems = load_all(resolver, names)
    if problems:
        for p in problems:
            click.echo(str(p), err=True)
        sys.exit(EXIT_INVALID)  # nothing written
    rel = [os.path.relpath(Path(n).absolute(), root) for n in names]
    lock = resolver.new_lock(rel)
    lock.write()
    for key, entry in sorted(lock.references.items()):
        old = resolver.lock.references.get(key)
        verb = "pinned" if old is None else ("moved" if old.commit != entry.commit else "kept")
        click.echo(f"{verb} {key} at {entry.commit[:12]} ({len(entry.files)} files)")
    click.echo(f"wrote {lock.path}")
