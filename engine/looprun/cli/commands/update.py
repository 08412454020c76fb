"""``looprun update [REF]``: move remote template references forward, as ``pre-commit
autoupdate`` does: a tag to the newest tag, a branch to its new head; the reference is
rewritten in the template's text (nothing else changes) and the lock refreshed."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from looprun.errors import EXIT_INVALID, Location, Problem, TemplateError
from looprun.system.atomic import write_atomic
from looprun.template.sharing import lockfile
from looprun.template.sharing.gitcache import GitError
from looprun.template.sharing.load import load_all
from looprun.template.sharing.resolver import Resolver, Use


def _rewrite(use: Use, old: str, new: str) -> tuple[Path, str, str] | None:
    """The file of ``use`` with its reference's ``@old#`` made ``@new#`` on its line only."""
    path = Path(use.file)
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    line = lines[use.line - 1]
    start = line.find(f"@{old}#", max(use.col - 1, 0))
    if start < 0:
        return None
    lines[use.line - 1] = line[:start] + f"@{new}#" + line[start + len(old) + 2 :]
    return path, text, "".join(lines)


@click.command("update")
@click.argument("ref", required=False)
def command(ref: str | None) -> None:
    """Move the remote references in the lock's templates forward (REF: only the
    references whose git+URL@REF or URL starts with it): a tag to the newest tag, a
    branch to its new head. Rewrites the reference in the template, refreshes
    looprun.lock and prints what changed. References written inside a remote template
    move only through that template's own repository."""
    root = lockfile.find_root(Path.cwd())
    lock = lockfile.read(root)
    names = [str(root / t) for t in lock.templates]
    if not names:
        raise TemplateError(
            [Problem(Location(str(lock.path)), "no lock with templates here: run `looprun lock`")]
        )
    chosen = frozenset(
        k for k in lock.references if ref is None or k.startswith(ref) or k[4:].startswith(ref)
    )
    first = Resolver(root, locking=True, refresh=chosen)
    problems = load_all(first, names)
    edits: list[tuple[Path, str, str]] = []
    renamed: dict[str, str] = {}
    for key in sorted(chosen & set(first.used)):
        uses = [u for u in first.uses if u.reference.key == key]
        entry = first.used[key]
        if not uses:
            click.echo(f"{key}: written inside a remote template; update it in its own repository")
            continue
        newest = uses[0].reference.ref
        if entry.kind == "tag":
            try:
                tags = first.cache.tags(uses[0].reference.url)
            except GitError as exc:
                problems.append(
                    Problem(Location(uses[0].file, uses[0].line, uses[0].col), str(exc))
                )
                continue
            newest = tags[0] if tags else newest
        if newest != uses[0].reference.ref:
            renamed[key] = key.rsplit("@", 1)[0] + "@" + newest
            for use in uses:
                edit = _rewrite(use, use.reference.ref, newest)
                if edit is not None:
                    edits.append(edit)
    if problems:
        for p in problems:
            click.echo(str(p), err=True)
        sys.exit(EXIT_INVALID)
    for path, _, new in edits:
        write_atomic(path, new)
    second = Resolver(root, locking=True, refresh=chosen | frozenset(renamed.values()))
    problems = load_all(second, names)
    if problems:
        for path, old, _ in edits:  # back as it was: the lock and the templates agree
            write_atomic(path, old)
        for p in problems:
            click.echo(str(p), err=True)
        sys.exit(EXIT_INVALID)
    fresh = second.new_lock(lock.templates)
    fresh.write()
    for key in sorted(chosen):
        before = lock.references[key]
        now_key = renamed.get(key, key)
        after = fresh.references.get(now_key)
        if after is None:
            continue
        if now_key == key and after.commit == before.commit:
            click.echo(f"{key}: already up to date ({before.commit[:12]})")
        else:
            click.echo(f"{key} ({before.commit[:12]}) -> {now_key} ({after.commit[:12]})")
    for path, _, _ in edits:
        click.echo(f"rewrote {path}")
