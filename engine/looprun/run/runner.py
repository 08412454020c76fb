"""A run started from the command line: template, inputs and models checked, the run
directory made and its invocation sealed, then driven (``drive``). Progress goes to
stderr; with ``--json`` stdout carries only the summary object. ``resume`` continues a
run after a crash, a kill or an approval pause; ``listing`` lists them.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from looprun.checks.clean_tree import seeds_ahead
from looprun.checks.holdout import resolve as resolve_holdouts
from looprun.checks.stacks import get as get_stack
from looprun.checks.stacks import missing_tools
from looprun.checks.stacks.detect import detect as detect_stack
from looprun.checks.stacks.detect import given as given_stack
from looprun.errors import LooprunError, UsageError
from looprun.journal import recorded, sealed
from looprun.journal.runs import new_run_id
from looprun.journal.writer import RunJournal
from looprun.loop.inputs import build_inputs, parse_sets
from looprun.models.base import Model
from looprun.run.drive import drive, err
from looprun.run.executors import (
    ExecutorFactory,
    RemoteExecutors,
    executor_factory,
    executor_spec,
)
from looprun.run.models import ModelEvents, resolve_models
from looprun.run.ports import check_hidden
from looprun.run.stack_setup import with_stack_settings
from looprun.run.timing import RunTimer
from looprun.run.until import check_options, save_new, template_ref
from looprun.run.workdir import workdir_of
from looprun.sandbox import pick, probe_ahead
from looprun.template import slots
from looprun.template.deps import recording
from looprun.template.loader import load_template
from looprun.template.model import Template
from looprun.template.slots import StackChoice
from looprun.template.valid_cache import ValidCache, file_digest
from looprun.tracing.config import open_trace
from looprun.workspace.commit import current_branch
from looprun.workspace.lock import RunLock
from looprun.workspace.snapshots import QuickSnapshots
from looprun.workspace.tree import Workspace


def load(ref: str, cache: ValidCache | None = None) -> Template:
    """The template at ``ref``. A file ``cache`` knows as loaded cleanly, with nothing it
    read changed since (its own bytes, its parents', fragments', sub-loops', the engine
    and the schema), skips the schema check and the validator's import; a file that
    loads cleanly is remembered there. Any change is a miss: validated in full."""
    if cache is None or not Path(ref).is_file():
        return load_template(ref)
    if cache.known_valid(ref):
        return load_template(ref, schema=False)
    with recording() as deps:
        template = load_template(ref)
    cache.remember_valid(ref, deps)
    return template


def bind_numbers(ref: str, template: Template, sets: Mapping[str, Any], inputs: Any) -> Template:
    """The template again, if a number it reads from an input (``{{ inputs.NAME }}``) was
    given with ``--set``: the value is checked where it is used, like the default was."""

    named = {n for n in template.input_numbers.values() if n in sets}
    if not named:
        return template
    return load_template(ref, given={n: inputs[n] for n in named})


def choose_stack(workdir: Path, sets: Mapping[str, Any]) -> StackChoice:
    """The stack templates compose in: ``--set stack=NAME``, else what the repository's
    marker files say (or why that cannot be told, reported only where a pack is needed)."""
    name = sets.get("stack")
    if isinstance(name, str) and name:
        return given_stack(name)
    return detect_stack(workdir)


def recorded_stack(invocation: Mapping[str, Any]) -> StackChoice | None:
    """The stack a run recorded (None for a run that composed no pack)."""
    name = invocation.get("stack")
    if isinstance(name, str) and name:
        return StackChoice(name, "the run's stack", given=True)
    return None


def uses_stack(template: Template) -> bool:
    """Whether a stack's pack was composed in (any observer runs through a stack)."""
    return any(spec.stack for spec in template.observe.values()) or "stack" in template.inputs


def check_toolchains(template: Template) -> None:
    """A stack's checks whose tools are missing, or that its pack says cannot run there,
    can never pass: stop before any model call (exit 1) with what to install or why, not
    a check that fails every iteration."""
    for spec in template.observe.values():
        if spec.unavailable:  # the pack fragment says this stack has no tool for it
            raise LooprunError(spec.unavailable)
    stacks_used: dict[str, str] = {}
    for spec in template.observe.values():
        if spec.stack:
            stacks_used.setdefault(spec.stack, spec.name)
    for stack, observer in sorted(stacks_used.items()):
        missing = missing_tools(get_stack(stack))
        if missing:
            raise LooprunError(
                f"observer {observer!r} ({stack} stack) cannot run: {'; '.join(missing)}"
            )


def resolve_ref(ref: str) -> str:
    """A template path made absolute (resume runs from anywhere); built-in names stay."""
    p = Path(ref).expanduser()
    return str(p.resolve()) if p.exists() else ref


def check_sandbox(template: Template, cli_mode: str | None) -> None:
    """``required`` on a host without a sandbox stops here, before anything starts (exit
    2); ``auto`` says so later, once the run has begun."""

    if (cli_mode or template.sandbox.mode) == "required":
        pick("required", err)


# -- the commands ---------------------------------------------------------------------------


MAX_INTENT_CHARS = 200_000


def read_intent(intent: str | None, intent_file: str | None) -> str | None:
    """The intent from ``--intent`` or ``--intent-file`` (``-``: stdin). The text is a
    value: it reaches prompts as data, never as a template or a command."""
    if intent_file is None:
        return intent
    if intent is not None:
        raise UsageError("give the intent once: --intent or --intent-file")
    where = "stdin" if intent_file == "-" else intent_file
    try:
        if intent_file == "-":
            text = sys.stdin.buffer.read().decode("utf-8")
        else:
            text = Path(intent_file).expanduser().read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise UsageError(f"--intent-file {where}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"--intent-file {where}: a directory, not a file") from None
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"--intent-file {where}: not UTF-8 text (byte {exc.start}: {exc.reason})"
        ) from None
    text = text.strip()
    if not text:
        raise UsageError(f"--intent-file {where}: the intent is empty")
    if len(text) > MAX_INTENT_CHARS:
        raise UsageError(
            f"--intent-file {where}: {len(text):,} characters; an intent may have at most "
            f"{MAX_INTENT_CHARS:,}"
        )
    return text


def run_from_cli(
    *, remote: RemoteExecutors | None = None, cache: ValidCache | None = None, **options: Any
) -> int:
    """``looprun TEMPLATE --intent ...``: returns the outcome's exit code. ``remote``
    makes the executors ``--executor ray`` names (the CLI passes Ray's); ``cache``
    remembers templates that loaded cleanly (see :func:`load`)."""
    timer = RunTimer()  # first: what came before is the start-up
    probe_ahead(options.get("sandbox"))  # while the template loads
    options = {**options, "intent": read_intent(options.get("intent"), options.get("intent_file"))}
    workdir = workdir_of(options.get("workdir") or ".")
    if options.get("commit"):  # refuse before spending a token, not after the work
        current_branch(workdir)
    check_options(options)
    until_text = None
    if options.get("until") is not None:  # the loop's template made from the command line
        ref, until_text = template_ref(workdir, options)
    else:
        ref = resolve_ref(options["template"])
    sets = parse_sets(options.get("sets") or ())
    choice = choose_stack(workdir, sets)
    seeds_ahead(choice.name, workdir)  # the first check's copy of its seeds, while we load
    with recording() as built, slots.chosen(choice) as composed:  # every file, recorded
        template = load(ref, None if until_text is not None else cache)
    choice = composed.choice or choice  # a template that includes a pack pins its stack
    options = {**options, "template_files": recorded.built_from(built, workdir)}
    if "stack" in template.inputs and not sets.get("stack") and choice.name is not None:
        sets = {**sets, "stack": choice.name}  # recorded with the run, seen by prompts
    if choice.name is not None and uses_stack(template):
        err(f"stack: {choice.name} ({choice.why})")
    # what the stack reads from the repository's base (its test runner): recorded in the
    # run's sets, so a resume and the sub-loops use it whatever the tree says by then
    sets, stack_inputs = with_stack_settings(template, workdir, sets, err)
    inputs = build_inputs(template.inputs, options.get("intent"), sets)
    if until_text is not None and options.get("save"):
        err(
            f"looprun: wrote {save_new(options['save'], until_text)} (run it with "
            "`looprun FILE --intent TEXT`)"
        )
    with slots.chosen(choice):
        template = bind_numbers(ref, template, sets, inputs)
    options = {
        **options,
        "stack": choice.name if uses_stack(template) else None,
        "stack_inputs": stack_inputs,
    }
    events = ModelEvents()
    act, plan, refs = resolve_models(
        template, options.get("model"), options.get("plan_model"), options.get("base_url"), events
    )
    check_sandbox(template, options.get("sandbox"))
    check_toolchains(template)
    if resolve_holdouts(template.observe, inputs, workdir):  # a wrong path stops here
        mode = options.get("sandbox") or template.sandbox.mode
        backend = pick(mode, lambda _line: None) if mode != "off" else None
        check_hidden(template, None if backend is None else backend.name)
    options = {**options, "executor": executor_spec(options.get("executor"))}
    # a bad --executor or a missing Ray stops here, before the run
    executor = executor_factory(options, remote, warm=template.each_task is not None)

    run_id = new_run_id()
    with RunLock(workdir / ".looprun", run_id), slots.chosen(choice):
        return _start(
            template,
            workdir,
            run_id,
            ref,
            inputs,
            sets,
            refs,
            act,
            plan,
            events,
            options,
            executor,
            timer,
        )


def _start(
    template: Template,
    workdir: Path,
    run_id: str,
    ref: str,
    inputs: Mapping[str, Any],
    sets: Mapping[str, Any],
    refs: Mapping[str, str],
    act: Model,
    plan: Model,
    events: ModelEvents,
    options: Mapping[str, Any],
    executor: ExecutorFactory,
    timer: RunTimer | None = None,
) -> int:
    journal = RunJournal.create(workdir, run_id)
    events.journal = journal
    invocation = {
        "template": ref,
        "intent": options.get("intent"),
        "sets": sets,
        "models": refs,
        # what the command line said, so sub-loops (and a resume) resolve their own roles
        # with the same precedence: command line > environment > config > sub-template
        "cli_models": {"act": options.get("model"), "plan": options.get("plan_model")},
        "base_url": options.get("base_url"),
        "max_iterations": options.get("max_iterations"),
        "commit": bool(options.get("commit")),
        "sandbox": options.get("sandbox"),  # the command line's choice; None: the template's
        "no_verify": bool(options.get("no_verify")),
        "executor": options.get("executor") or "local",
        "sync_remote": options.get("sync_remote"),
        "workdir": str(workdir),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "template_sha256": file_digest(template.source),
        "template_files": options.get("template_files"),
        # the stack the template composed its pack for: a resume and the sub-loops use it
        "stack": options.get("stack"),
        # what the stack read from the base (its test runner): the sub-loops get it too
        "stack_inputs": options.get("stack_inputs") or {},
    }
    # opened once: the invocation is sealed in its repository, then the run works in it
    ws = Workspace.open(workdir, state_dir=workdir / ".looprun", watched=True)
    save_invocation(journal, ws.git, invocation, ws.quick)
    config = options.get("trace")
    trace = None if config is None else open_trace(config, journal.redact, template.name)
    with journal:
        try:
            return drive(
                template,
                workdir,
                journal,
                inputs,
                invocation,
                act,
                plan,
                as_json=bool(options.get("as_json")),
                state=None,
                approval=None,
                events=events,
                executor=executor,
                trace=trace,
                workspace=ws,
                timer=timer,
            )
        finally:
            if trace is not None:
                trace.close()


def repository(workdir: Path) -> Any:
    """The git repository of the workdir, as the run's workspace opens it."""

    return Workspace.open(workdir, state_dir=workdir / ".looprun").git


def save_invocation(
    journal: RunJournal,
    git: Any,
    invocation: Mapping[str, Any],
    quick: QuickSnapshots | None = None,
) -> None:
    """``run.json``, sealed first (see :mod:`looprun.journal.sealed`; ``quick``: the
    workspace's in-process object writer): a kill between the two leaves the new seal
    beside the previous file, which a resume refuses (saying how to restore it), never a
    file nothing vouches for."""
    sealed.seal(git, journal.run_id, journal.invocation_text(invocation), quick)
    journal.save_invocation(invocation)
