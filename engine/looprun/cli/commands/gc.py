"""``looprun gc``: prune the checkpoint refs of deleted runs."""

from __future__ import annotations

from pathlib import Path

import click

from looprun.journal.gc import prune_refs


@click.command("gc")
@click.option("--workdir", default=".", show_default=True, help="The repository to clean.")
@click.option("--dry-run", is_flag=True, help="Say what would be pruned; change nothing.")
@click.option(
    "--sync-remote",
    metavar="GIT_URL",
    help="Also prune those runs' refs on the remote their sub-loops were synced through.",
)
def command(workdir: str, dry_run: bool, sync_remote: str | None) -> None:
    """Prune the checkpoint refs (refs/looprun/...) of runs whose directory was deleted."""
    done = prune_refs(Path(workdir), dry_run=dry_run, sync_remote=sync_remote)
    verb = "would prune" if dry_run else "pruned"
    click.echo(
        f"{verb} {len(done.refs)} ref(s) of {len(done.runs)} deleted run(s)"
        + (f": {', '.join(done.runs)}" if done.runs else "")
        + f"; {done.kept} ref(s) kept"
        + (f"; {len(done.remote_refs)} ref(s) on {sync_remote}" if sync_remote else "")
    )
