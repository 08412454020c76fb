"""``looprun run`` (and ``looprun TEMPLATE``): run a loop template."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from looprun.cli.executors import ray_executors
from looprun.run.runner import run_from_cli
from looprun.template.code_cache import CodeCache
from looprun.template.compile_cache import keep_codes
from looprun.template.valid_cache import ValidCache, default_dir
from looprun.tracing.config import trace_config


@click.command("run", context_settings={"ignore_unknown_options": False})
@click.argument("template", required=False)
@click.option(
    "--until",
    metavar="CMD",
    help="No template: act until CMD exits 0 (its output is the feedback), with the usual "
    "caps; the files CMD names are read-only.",
)
@click.option(
    "--protect",
    multiple=True,
    metavar="GLOB",
    help="With --until: more paths the run may not change (repeatable).",
)
@click.option(
    "--save",
    metavar="FILE",
    help="With --until: also write the loop as a template to FILE (never over a file).",
)
@click.option("--intent", help="What you want done, in words.")
@click.option(
    "--intent-file",
    metavar="FILE",
    help="Read the intent from FILE (UTF-8; - for stdin): long or untrusted text.",
)
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Set an input.")
@click.option("--workdir", default=".", show_default=True, help="The repository to work in.")
@click.option("--model", help="Model for every role, e.g. openai:gpt-4o-mini, script:FILE.")
@click.option("--plan-model", help="Model for the plan role.")
@click.option("--base-url", help="Server for openai-compatible models.")
@click.option(
    "--max-iterations", type=click.IntRange(min=1), help="Override limits.max_iterations."
)
@click.option(
    "--commit",
    is_flag=True,
    help="When done, commit the files the run changed to the current branch (the message "
    "holds the intent and the run id; the repository's hooks run).",
)
@click.option(
    "--no-verify", is_flag=True, help="With --commit: skip the pre-commit and commit-msg hooks."
)
@click.option(
    "--sandbox",
    type=click.Choice(["auto", "required", "off"]),
    help="Run observers and model commands in an OS sandbox; overrides the template's sandbox.",
)
@click.option("--json", "as_json", is_flag=True, help="Print only the JSON summary on stdout.")
@click.option(
    "--executor",
    metavar="local|ray[:ADDRESS]",
    help="Where sub-loops run (default: threads here; also LOOPRUN_EXECUTOR).",
)
@click.option(
    "--sync-remote",
    metavar="GIT_URL",
    help="With --executor ray: the git remote workers fetch from and push to "
    "(default: this repository, for workers on this file system).",
)
@click.option(
    "--otel",
    is_flag=True,
    help="Export OpenTelemetry traces over OTLP/HTTP (the OTEL_EXPORTER_OTLP_* variables; "
    "on by default when OTEL_EXPORTER_OTLP_ENDPOINT is set; needs looprun[otel]).",
)
def command(**options: Any) -> None:
    """Run a loop template until its exit conditions hold or a limit stops it.

    `looprun --until CMD --intent TEXT` runs without a template: CMD is the check.

    \b
    Exit codes: 0 done, 3 exhausted (a limit), 4 stalled (no progress),
    5 escalated (needs a person), 6 aborted (by a refine rule),
    2 invalid template or usage, 1 runtime error,
    130 interrupted (Ctrl-C or SIGTERM; `looprun resume` continues it).
    """
    warn = lambda line: click.echo(line, err=True)  # noqa: E731
    options["trace"] = trace_config(os.environ, flag=options.pop("otel"), warn=warn)
    # beside `looprun validate`'s entries, not among them: a run checks less than validate
    cache = ValidCache(default_dir() / "loaded")
    # what Jinja made of the template's expressions last time (code_cache)
    codes = CodeCache(default_dir() / "compiled")
    keep_codes(codes)
    try:
        code = run_from_cli(remote=ray_executors, cache=cache, **options)
    finally:
        codes.save()
    sys.exit(code)
