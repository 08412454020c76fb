"""The command line: ``looprun TEMPLATE --intent ...`` runs a loop; subcommands validate,
explain, observe, resume and list runs. This is the one place that touches argv, the
environment and the terminal, and the one error boundary: every LooprunError becomes a
message on stderr and a documented exit code, never a traceback.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from looprun import __version__
from looprun.errors import EXIT_ERROR, LooprunError

F = TypeVar("F", bound=Callable[..., Any])


def _boundary(fn: F) -> F:
    """Map LooprunError to its exit code with a one-line (or per-problem) message, and an
    operating-system failure (a full disk, a file where a directory must go) to exit 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except LooprunError as exc:
            from looprun.system.redact import Redactor, secret_values

            text = Redactor(secret_values()).text(str(exc))  # secrets never reach stderr
            click.echo(f"looprun: {text}" if "\n" not in text else text, err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("looprun: interrupted", err=True)
            sys.exit(130)
        except BrokenPipeError:
            sys.exit(EXIT_ERROR)
        except OSError as exc:  # a full disk, a path in the way: say so, never a traceback
            where = f": {exc.filename}" if exc.filename else ""
            click.echo(f"looprun: {exc.strerror or exc}{where}", err=True)
            sys.exit(EXIT_ERROR)

    return wrapper  # type: ignore[return-value]


class _DefaultToRun(click.Group):
    """``looprun TEMPLATE ...`` is short for ``looprun run TEMPLATE ...``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_DefaultToRun, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="looprun")
def main() -> None:
    """Declarative loop templates for AI coding agents.

    \b
    looprun TEMPLATE --intent TEXT    run a template (a path or a built-in name)
    looprun validate PATH...          check templates; every problem as file:line:col
    looprun explain TEMPLATE          show the resolved template and its refine tree
    looprun test TEMPLATE CASES...    check which rule fires for given facts
    looprun init PATH                 start a team template extending a built-in one
    """
    from looprun.cli.terminal import guard_streams

    guard_streams()  # model and tool text reach the terminal: no escapes, no secrets


@main.command("validate")
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
@_boundary
def validate_cmd(paths: tuple[str, ...], quiet: bool, skip_other: bool, no_cache: bool) -> None:
    """Validate templates, fragments and case files; a directory: the looprun files in
    it. Exit 0 if all are valid, 2 if any is not.

    A file found valid is remembered with the content of every file it read; while none
    of them (nor looprun) changes, it is not checked again.

    In GitHub Actions (GITHUB_ACTIONS=true) each problem is also written as an
    `::error file=...,line=...,col=...::` annotation."""
    import os

    from looprun.cli.template_commands import validate
    from looprun.cli.terminal import in_actions, workflow_command
    from looprun.template.valid_cache import ValidCache, default_dir

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


@main.command("explain")
@click.argument("template")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "mermaid", "json"]),
    default="text",
    show_default=True,
    help="text: resolved template and tree; mermaid: flowchart; json: resolved document.",
)
@_boundary
def explain_cmd(template: str, fmt: str) -> None:
    """Show a template after composition, with its refine tree drawn."""
    from looprun.cli.template_commands import explain

    click.echo(explain(template, fmt))


@main.command("test")
@click.argument("args", nargs=-1, required=True, metavar="[TEMPLATE] CASES...")
@_boundary
def test_cmd(args: tuple[str, ...]) -> None:
    """Unit-test a template's decisions: given these facts, this rule fires.

    \b
    Each case in CASES (YAML) gives one iteration's facts and what must follow:
    the refine rule that fires (its position, as `looprun explain` numbers it),
    the action, its rendered message, whether the exit conditions hold.
    With one argument, the case file names its template (`template:`).
    With case files only, each names its own template (`template:`).
    Exit 0 when every case passes, 1 when one fails, 2 for an invalid file.
    """
    from looprun.cli.cases import run_case_files
    from looprun.cli.template_commands import is_case_file

    if all(is_case_file(a) for a in args):
        sys.exit(run_case_files(args, echo=click.echo))
    template, cases = (None, args) if len(args) == 1 else (args[0], args[1:])
    sys.exit(run_case_files(cases, template, echo=click.echo))


@main.command("init")
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
@_boundary
def init_cmd(
    path: str, base: str, name: str | None, cases: bool, force: bool, schema: str | None
) -> None:
    """Start a team template that extends a built-in one.

    \b
    The file starts with the `# yaml-language-server: $schema=...` line and holds the
    overrides teams usually change (paths, test command, diff size, limits), set to the
    parent's values and commented. It validates as written. Exit 2 if PATH exists
    (unless --force) or --extends names no built-in template.
    """
    from looprun.cli.scaffold import init_template

    done = init_template(path, base=base, name=name, cases=cases, force=force, schema=schema)
    click.echo(f"wrote {done.template} (extends {base}; schema {done.schema})")
    if done.cases is not None:
        click.echo(f"wrote {done.cases} (check it with: looprun test {done.cases})")
    click.echo(f"next: edit it, then looprun validate {done.template}")


@main.command("schema")
@click.option("--observation", is_flag=True, help="The observation schema instead.")
@click.option(
    "--output",
    "-o",
    metavar="FILE",
    help="Write it to FILE (for editors; point `--schema` of `looprun init` at it).",
)
@_boundary
def schema_cmd(observation: bool, output: str | None) -> None:
    """Print (or write) the JSON Schema for templates, for editors and CI."""
    from pathlib import Path

    from looprun.system.atomic import write_atomic
    from looprun.system.resources import schema_path

    text = schema_path("observation" if observation else "template").read_text("utf-8")
    if output is None:
        click.echo(text, nl=False)
        return
    write_atomic(Path(output), text)
    click.echo(f"wrote {output}")


@main.command("observe")
@click.argument("parser")
@click.argument("file", required=False)
@click.option("--run", "run", metavar="COMMAND", help="Run this shell command first, then parse.")
@click.option("--file", "file_opt", metavar="REPORT", help="The report the command writes.")
@click.option(
    "--option",
    "-o",
    "options",
    multiple=True,
    metavar="KEY=VALUE",
    help="A parser option; VALUE is JSON or a string; repeat a key for a list.",
)
@click.option("--workdir", default=".", show_default=True, help="Where to run and resolve paths.")
@click.option("--timeout", type=float, default=600.0, show_default=True, help="Seconds for --run.")
@click.option("--base", help="git_diff: the commit or tree to diff against (default HEAD).")
@click.option(
    "--sandbox",
    type=click.Choice(["auto", "required", "off"]),
    default="auto",
    show_default=True,
    help="Run --run in an OS sandbox (the workdir and a private temp dir writable).",
)
@click.option("--network", is_flag=True, help="Let the sandboxed command use the network.")
@_boundary
def observe_cmd(
    parser: str,
    file: str | None,
    run: str | None,
    file_opt: str | None,
    options: tuple[str, ...],
    workdir: str,
    timeout: float,
    base: str | None,
    sandbox: str,
    network: bool,
) -> None:
    """Parse a report (or a command's output) and print the observation as JSON.

    Exit 0 when the observation is ok, 1 when it is not, 2 for usage errors.
    """
    from looprun.cli.parsers import observe

    if file and file_opt and file != file_opt:
        raise click.UsageError("give the report once: FILE or --file")
    text, code = observe(
        parser,
        file or file_opt,
        run,
        options,
        workdir=workdir,
        timeout_s=timeout,
        base=base,
        sandbox=sandbox,
        network=network,
    )
    click.echo(text)
    sys.exit(code)


@main.command("run", context_settings={"ignore_unknown_options": False})
@click.argument("template")
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
@_boundary
def run_cmd(**options: Any) -> None:
    """Run a loop template until its exit conditions hold or a limit stops it.

    \b
    Exit codes: 0 done, 3 exhausted (a limit), 4 stalled (no progress),
    5 escalated (needs a person), 6 aborted (by a refine rule),
    2 invalid template or usage, 1 runtime error,
    130 interrupted (Ctrl-C or SIGTERM; `looprun resume` continues it).
    """
    from looprun.remote.ray_executor import ray_executors
    from looprun.run.runner import run_from_cli

    sys.exit(run_from_cli(remote=ray_executors, **options))


@main.command("resume")
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
    "else needed when the template file changed since the run started.",
)
@click.option("--commit", is_flag=True, help="With --bundle: commit when done, as the run asked.")
@click.option("--no-verify", is_flag=True, help="With --bundle --commit: skip the commit hooks.")
@_boundary
def resume_cmd(
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
) -> None:
    """Continue a run after a crash, a kill or an approval pause, from its last step."""
    from pathlib import Path

    from looprun.journal.recorded import ResumeChoices, vet_bundled
    from looprun.remote.ray_executor import ray_executors
    from looprun.run.resume import resume_from_cli
    from looprun.run.runner import resolve_ref

    named = None  # a bundle's template is in the run.json it vetted
    if bundle is not None:
        from looprun.journal.bundle import import_bundle

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
        )
    )


@main.command("runs")
@click.option("--workdir", default=".", show_default=True, help="The repository to look in.")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@_boundary
def runs_cmd(workdir: str, as_json: bool) -> None:
    """List the runs in a repository with their outcomes."""
    from looprun.run.listing import runs_from_cli

    sys.exit(runs_from_cli(workdir=workdir, as_json=as_json))


@main.command("report")
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
@_boundary
def report_cmd(
    run_id: str, workdir: str, fmt: str, output: str | None, max_chars: int | None
) -> None:
    """Write a run's report: intent, plan, each iteration (tools, files, checks, the rule
    that fired, the decision, the diff), tokens and cost, limits, outcome."""
    from pathlib import Path

    from looprun.report import render, report_for
    from looprun.system.atomic import write_atomic

    text = render(report_for(Path(workdir), run_id), fmt, max_chars=max_chars)
    if output is None:
        click.echo(text, nl=False)
        return
    write_atomic(Path(output), text)
    click.echo(f"wrote {output}", err=True)


@main.command("gc")
@click.option("--workdir", default=".", show_default=True, help="The repository to clean.")
@click.option("--dry-run", is_flag=True, help="Say what would be pruned; change nothing.")
@_boundary
def gc_cmd(workdir: str, dry_run: bool) -> None:
    """Prune the checkpoint refs (refs/looprun/...) of runs whose directory was deleted."""
    from pathlib import Path

    from looprun.journal.gc import prune_refs

    done = prune_refs(Path(workdir), dry_run=dry_run)
    verb = "would prune" if dry_run else "pruned"
    click.echo(
        f"{verb} {len(done.refs)} ref(s) of {len(done.runs)} deleted run(s)"
        + (f": {', '.join(done.runs)}" if done.runs else "")
        + f"; {done.kept} ref(s) kept"
    )


@main.command("bundle")
@click.argument("run_id")
@click.option("--workdir", default=".", show_default=True, help="The repository of the run.")
@click.option("--output", "-o", metavar="FILE", help="Where to write it (default RUN_ID.looprun).")
@_boundary
def bundle_cmd(run_id: str, workdir: str, output: str | None) -> None:
    """Pack a run (its directory and checkpoint refs) so another clone can resume it:
    `looprun resume --bundle FILE` there."""
    from pathlib import Path

    from looprun.journal.bundle import create_bundle

    path = create_bundle(Path(workdir).resolve(), run_id, Path(output) if output else None)
    click.echo(str(path))


def entry() -> None:  # pragma: no cover - console script shim
    main()
