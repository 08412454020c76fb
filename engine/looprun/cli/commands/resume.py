"""``looprun resume``: continue a run from its last step, or a run bundled elsewhere."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from looprun.cli.executors import ray_executors
from looprun.journal.bundle import import_bundle
from looprun.journal.recorded import ResumeChoices, vet_bundled
from looprun.run.resume import resume_from_cli
from looprun.run.runner import resolve_ref
from looprun.tracing.config import trace_config


@click.command("resume")
@click.argument("run_id", required=False)
@click.option("--workdir", default=".", show_default=True, help="The repository of the run.")
@click.option("--approve", is_flag=True, help="Approve the changes a paused run waits on.")
@click.option("--reject", is_flag=True, help="Reject them: roll back and let the loop retry.")
@click.option("--json", "as_json", is_flag=True, help="Print only the JSON summary on stdout.")
@click.option(
    "--bundle",
    "bundle",
    metavar="FILE",
    help="Resume a run bundled in another clone (`looprun bundle`): unpack it here first.",
)
@click.option(
    "--executor",
    metavar="local|ray[:ADDRESS]",
    help="Where sub-loops resume (default: where the run started them; local for a bundle).",
)
@click.option(
    "--sync-remote",
    metavar="GIT_URL",
    help="With --executor ray: the git remote workers use (a bundle's is never used).",
)
@click.option(
    "--sandbox",
    type=click.Choice(["auto", "required", "off"]),
    help="The OS sandbox mode to resume with; a recorded mode weaker than the "
    "template's is used only when named here.",
)
@click.option(
    "--base-url",
    help="Server for openai-compatible models; a recorded one is used only when named "
    "here or in LOOPRUN_BASE_URL.",
)
@click.option(
    "--template",
    metavar="TEMPLATE",
    help="The template to go on with: with --bundle, default the bundle's if in this clone; "
    "else needed when a file of the template (a fragment, a parent, a sub-loop's, "
    "looprun.lock) changed since the run started: goes on with them as they are now.",
)
@click.option("--commit", is_flag=True, help="With --bundle: commit when done, as the run asked.")
@click.option("--no-verify", is_flag=True, help="With --bundle --commit: skip the commit hooks.")
@click.option(
    "--otel",
    is_flag=True,
    help="Export OpenTelemetry traces of the resumed run (see looprun run --otel).",
)
def command(
    run_id: str | None,
    workdir: str,
    approve: bool,
    reject: bool,
    as_json: bool,
    bundle: str | None,
    executor: str | None,
    sync_remote: str | None,
    template: str | None,
    sandbox: str | None,
    base_url: str | None,
    commit: bool,
    no_verify: bool,
    otel: bool,
) -> None:
    """Continue a run after a crash, a kill or an approval pause, from its last step."""
    named = None  # a bundle's template is in the run.json it vetted
    if bundle is not None:
        if approve and reject:
            raise click.UsageError("--approve and --reject exclude each other")
        if template is not None:
            template = resolve_ref(template)
        choices = ResumeChoices(
            template, sandbox, base_url, executor, sync_remote, commit, no_verify
        )
        unpacked = import_bundle(
            Path(workdir).resolve(),
            Path(bundle),
            lambda inv: vet_bundled(
                inv, Path(workdir).resolve(), choices, lambda text: click.echo(text, err=True)
            ),
        )
        if run_id is not None and run_id != unpacked:
            raise click.UsageError(f"the bundle holds run {unpacked}, not {run_id}")
        click.echo(f"unpacked run {unpacked} from {bundle}", err=True)
        run_id = unpacked
    elif run_id is None:
        raise click.UsageError("name the run to resume: looprun resume RUN_ID (or --bundle FILE)")
    elif commit or no_verify:
        raise click.UsageError("--commit and --no-verify go with --bundle")
    elif template is not None:
        named = resolve_ref(template)
    sys.exit(
        resume_from_cli(
            run_id=run_id,
            workdir=workdir,
            approve=approve,
            reject=reject,
            as_json=as_json,
            choices=ResumeChoices(named, sandbox, base_url, executor, sync_remote),
            remote=ray_executors,
            trace=trace_config(os.environ, flag=otel, warn=lambda x: click.echo(x, err=True)),
        )
    )
