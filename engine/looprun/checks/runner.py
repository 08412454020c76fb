"""Run one observer: decide whether it applies, run its command, parse what it produced.

The observer's ``run`` is trusted, reviewed template config and runs through a shell,
with a timeout that stops it and all it started. Whatever is at the report's path (a
file left from an earlier command, a link or a FIFO planted there) is removed before the
command runs, so a stale report can never pass as fresh and the command never writes
through a link; a report missing afterwards is a failed observation, not a crash. What
the command leaves running is killed before the report is read (``system/proc``) and
noted in the feedback; a command whose supervisor was killed first has no trusted result.

A skipped observer (its ``when`` is false) gives ``ran=False, ok=True``: the template
said the check does not apply. Conditions that need the check to have run use
``name.ran and name.ok``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from looprun.checks import stacks
from looprun.checks.clean_tree import CheckTrees, TreeError
from looprun.checks.git_diff import Snapshot, with_git_output
from looprun.checks.holdout import Holdout, HoldoutError, copied_in, sealed
from looprun.checks.pytest_pin import PinError, pin
from looprun.data.freeze import freeze
from looprun.observe.base import Observation, ParseInput
from looprun.observe.feedback import tail
from looprun.observe.normalise import failure_signature
from looprun.observe.outcome_channel import (
    LISTED,
    PLUGIN_DIR,
    Outcomes,
    listening,
    with_helpers,
)
from looprun.observe.registry import empty_facts_of, get_parser
from looprun.system import safefs
from looprun.system.atomic import write_atomic
from looprun.system.crashpoint import crash_point
from looprun.system.proc import NO_BYTECODE, run_process, scrubbed_env
from looprun.system.redact import Redactor, secret_values
from looprun.template.model import bound_options

if TYPE_CHECKING:
    from looprun.sandbox import Sandbox
    from looprun.template.model import Constraints, ObserverSpec

# a pinned check's interpreters skip the user's site directory and its .pth files, and
# run in safe-path mode: `python -m pytest` does not put the workdir first on sys.path, so
# a `pytest.py` or `json.py` there is not imported in place of pytest's own (pytest_pin
# gives the tests the workdir back through pytest's `pythonpath`); LOOPRUN_SAFEPATH asks
# the outcome plugin to drop it again for the processes the tests start
_ISOLATED: Mapping[str, str] = {"PYTHONNOUSERSITE": "1", "PYTHONSAFEPATH": "1"}
_SAFEPATH_MARK: Mapping[str, str] = {"LOOPRUN_SAFEPATH": "1"}

# git_diff options that default to the act constraints when the observer does not set them.
_CONSTRAINT_DEFAULTS = ("allow", "deny", "forbidden_patterns", "max_lines")


def _with_constraints(
    parser: str, options: Mapping[str, Any], constraints: Constraints | None
) -> dict[str, Any]:
    merged = dict(options)
    if parser != "git_diff" or constraints is None:
        return merged
    defaults = {
        "allow": list(constraints.paths.allow),
        "deny": list(constraints.paths.deny),
        "forbidden_patterns": list(constraints.forbidden_patterns),
        "max_lines": constraints.max_diff_lines,
    }
    for key in _CONSTRAINT_DEFAULTS:
        if merged.get(key) is None and defaults[key]:
            merged[key] = defaults[key]
    return merged


def _remove_report(report: Path) -> None:
    """Remove what is at the report's path, a file, a FIFO or a link (not its target), so
    the command writes a new file there; a directory is left for the parser to refuse."""
    gone = (FileNotFoundError, NotADirectoryError, safefs.UnsafePathError)
    with contextlib.suppress(*gone), safefs.opened_dir(Path(os.path.realpath(report.parent))) as fd:
        safefs.remove_entry(fd, report.name, trees=False)


def _failed(parser_name: str, message: str) -> Observation:
    """A check that did not yield a result: not ok, every declared fact empty."""
    return Observation(
        parser=parser_name,
        ok=False,
        error=message,
        signature=failure_signature([], message),
        feedback=message,
        facts=freeze(empty_facts_of(parser_name)),
    )


def observe_command(
    parser_name: str,
    *,
    workdir: Path,
    command: str | None = None,
    file: Path | None = None,
    options: Mapping[str, Any] | None = None,
    timeout_s: float | None = 600.0,
    deadline: float | None = None,
    base: str | None = None,
    git_dir: Path | None = None,
    on_output: Callable[[bytes], None] | None = None,
    output_log: Path | None = None,
    exclude: tuple[str, ...] = (),
    sandbox: Sandbox | None = None,
    isolated: bool = False,
    snapshot: Snapshot | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> Observation:
    """Run ``command`` (if any) in ``workdir``, then parse ``file`` and/or its output.
    With a ``sandbox`` the command runs confined to it; ``isolated`` keeps the user's
    site directory (start-up files outside the base) out of its interpreters.
    ``snapshot``: the run's snapshot of the tree, for git_diff (see ``with_git_output``)."""
    parser = get_parser(parser_name)
    report = None if file is None else (file if file.is_absolute() else workdir / file)
    output: str | None = None
    outcomes: Outcomes | None = None
    exit_code: int | None = None
    timed_out = False
    unsupervised: str | None = None  # why nothing the command wrote can be trusted
    leftovers = 0
    redactor = Redactor(secret_values(), marker="***")
    if command is not None:
        if report is not None:
            _remove_report(report)  # never let an old report pass as this run's result
        env = scrubbed_env(
            extra={**NO_BYTECODE, **(_ISOLATED if isolated else {}), **(extra_env or {})}
        )
        if isolated and "PYTHONSAFEPATH" not in os.environ:
            env.update(_SAFEPATH_MARK)  # the user's own PYTHONSAFEPATH stays set
        if isolated:
            env = with_helpers(env)  # a pinned check may run one of looprun's runners
        with contextlib.ExitStack() as stack:
            fds: tuple[int, ...] = ()
            if (options or {}).get("outcome_channel") == "pytest":
                watch = (options or {}).get("exercised") is True
                env, fd, outcomes = stack.enter_context(listening(env, exercised=watch))
                fds = (fd,)
            result = run_process(
                command,
                cwd=workdir,
                timeout_s=timeout_s,
                shell=True,
                env=env,
                deadline=deadline,
                on_output=on_output,
                sandbox=sandbox,
                pass_fds=fds,
            )
        output, exit_code, timed_out = (
            result.output and redactor.text(result.output),
            result.exit_code,
            result.timed_out,
        )
        leftovers = result.leftovers
        if not result.supervised:
            unsupervised = (
                "the check's process supervisor was killed before the command ended, so"
                " what it left running may have rewritten its report: the result is not"
                " trusted"
            )
        if output_log is not None:
            # a log, not a record; in a directory commands write, so no link is followed
            write_atomic(output_log, output or "", nofollow=True, sync="none")
    data = ParseInput(
        workdir=workdir,
        file=report,
        output=output,
        exit_code=exit_code,
        timed_out=timed_out,
        options=freeze(dict(options or {})),
        base=base,
        git_dir=git_dir,
        exclude=exclude,
        outcomes=outcomes,
    )
    try:
        if parser_name == "git_diff":  # its command is git, run here with the repo pinned
            # a command of its own may have written since the run's snapshot: git looks
            data = with_git_output(data, snapshot if command is None else None)
        obs = parser.parse(data)
    except Exception as exc:
        obs = _failed(parser_name, f"parser {parser_name!r} failed: {type(exc).__name__}: {exc}")
    changes: dict[str, Any] = {"exit_code": exit_code}
    if timed_out and parser_name != "exit_code":
        message = (
            f"the command timed out after {timeout_s:g}s" if timeout_s else "the command timed out"
        )
        changes.update(
            ok=False,
            error=message if obs.error is None else f"{message}; {obs.error}",
            feedback=f"{message}\n{tail(output or '', 2048)}\n{obs.feedback}"[:4096],
            signature=failure_signature([], message),
        )
    changes["feedback"] = redactor.text(changes.get("feedback", obs.feedback) or "")
    if obs.error:
        error = changes.get("error", obs.error)
        changes["error"] = error and redactor.text(error)
    obs = dataclasses.replace(obs, **changes)
    if unsupervised is not None:
        return _tampered(parser_name, unsupervised, exit_code=exit_code)
    if leftovers:
        note = (
            f"note: the command left {leftovers} process(es) running; they were killed"
            " before its report was read (a test should wait for what it starts)"
        )
        obs = dataclasses.replace(obs, feedback=f"{obs.feedback}\n{note}".strip())
    return obs


def run_observer(
    spec: ObserverSpec,
    context: Mapping[str, Any],
    *,
    workdir: Path,
    artifacts: Path,
    base: str | None,
    git_dir: Path | None,
    deadline: float | None,
    on_output: Callable[[bytes], None] | None = None,
    constraints: Constraints | None = None,
    exclude: tuple[str, ...] = (),
    sandbox: Sandbox | None = None,
    pinned: Path | None = None,
    holdout: Holdout | None = None,
    snapshot: Snapshot | None = None,
    trees: CheckTrees | None = None,
    seal: bool = True,
    listing: tuple[str, ...] = (),
) -> Observation:
    """Observe once for the loop. ExpressionError (a bad ``when``/``run``) propagates.

    ``pinned`` is a directory of the run no command can write, where an observer with
    ``pin_config`` gets the base's configuration copied; ``holdout``: the resolved
    held-out tests of an observer that declares them; ``snapshot``: the run's own
    snapshot of the tree, which git_diff reuses; ``trees``: the run's clean copies, where
    an observer with ``stack`` runs its command (see ``clean_tree``); ``seal``: False only
    for the engine's own look at held-out variants (their triage), never for the loop;
    ``listing``: the stack's words that make the command list its tests instead of
    running them (its parser is told ``listed``), on the same tree, configuration and
    sandbox as a run of them."""
    if spec.when is not None and not spec.when.evaluate(context):
        return Observation(
            parser=spec.parser,
            ok=True,
            ran=False,
            feedback=f"{spec.name}: skipped (`{spec.when.source}` is false)",
            signature=failure_signature([]),
            facts=freeze(empty_facts_of(spec.parser)),
        )
    command = spec.run.render(context) if spec.run is not None else None
    inputs = context.get("inputs")
    spec = dataclasses.replace(
        spec,
        options=freeze(bound_options(spec.options, inputs if isinstance(inputs, Mapping) else {})),
    )
    if command is not None and spec.select:
        # a narrow stage: test ids, as the stack's test command takes them, data quoted
        # one by one (checked by the engine)
        words = _selection(spec.stack, spec.select)
        if words is None:
            return _failed(spec.parser, f"{spec.name}: cannot select the tests {spec.select!r}")
        command = command.rstrip() + " " + " ".join(shlex.quote(w) for w in words)
    if command is not None and listing:
        command = command.rstrip() + " " + " ".join(shlex.quote(w) for w in listing)
        spec = dataclasses.replace(spec, options=freeze({**spec.options, LISTED: True}))
    file = Path(spec.file.render(context).strip()) if spec.file is not None else None
    extra_env: Mapping[str, str] | None = None
    checked = workdir  # where the command runs and the parser reads paths from
    if spec.stack is not None and command is not None:
        try:
            if trees is None:
                raise TreeError("no run directory to build the check's tree in")
            checked, extra_env, tampered = trees.prepare(
                spec.stack, workdir=workdir, git_dir=git_dir, base=base, snapshot=snapshot
            )
        except TreeError as exc:
            return _failed(spec.parser, f"{spec.name}: stack {spec.stack}: {exc}")
        if tampered:
            return _tampered(spec.parser, f"{spec.name}: {tampered}")
    if spec.pin_config is not None and command is not None:
        try:
            if pinned is None:
                raise PinError("no run directory to keep the pinned configuration in")
            channel = spec.options.get("outcome_channel") == "pytest"
            command = pin(
                command,
                tree=None if checked == workdir else checked,
                workdir=workdir,
                git_dir=git_dir,
                base=base,
                into=pinned / spec.name,
                ahead=(PLUGIN_DIR,) if channel else (),
            )
        except PinError as exc:
            return _failed(spec.parser, f"{spec.name}: pin_config {spec.pin_config}: {exc}")
    if spec.holdout is not None:
        return _held_out(
            spec,
            holdout,
            command,
            file,
            workdir=checked,
            artifacts=artifacts,
            deadline=deadline,
            sandbox=sandbox,
            extra_env=extra_env,
            seal=seal,
        )
    obs = observe_command(
        spec.parser,
        workdir=checked,
        command=command,
        file=file,
        options=_with_constraints(spec.parser, spec.options, constraints),
        timeout_s=spec.timeout_s,
        deadline=deadline,
        base=base,
        git_dir=git_dir,
        on_output=on_output,
        output_log=artifacts / f"{spec.name}.output.txt" if command is not None else None,
        exclude=exclude,
        sandbox=sandbox,
        isolated=spec.pin_config is not None,
        snapshot=snapshot,
        extra_env=extra_env,
    )
    if spec.select and not listing:
        crash_point("observe.narrow")  # test-only: a kill between a narrow stage and its verdict
    return obs


def _selection(stack: str | None, ids: tuple[str, ...]) -> tuple[str, ...] | None:
    """The words that narrow the stack's test command to ``ids`` (None: they cannot)."""
    chosen = stacks.get(stack).select if stack is not None else None
    if chosen is None:
        return ids
    try:
        return chosen(ids)
    except ValueError:
        return None


def _held_out(
    spec: ObserverSpec,
    holdout: Holdout | None,
    command: str | None,
    file: Path | None,
    *,
    workdir: Path,
    artifacts: Path,
    deadline: float | None,
    sandbox: Sandbox | None,
    extra_env: Mapping[str, str] | None = None,
    seal: bool = True,
) -> Observation:
    """A held-out observer: its tests copied in for the command, no output streamed or
    logged, its report and whatever it added to the artifacts removed, the result sealed
    (unless ``seal`` is False: the engine's triage, which keeps it from the loop)."""
    try:
        with contextlib.ExitStack() as stack:
            stack.callback(_remove_new, artifacts, _entries(artifacts))
            if file is not None:
                stack.callback(_remove_file, file if file.is_absolute() else workdir / file)
            if holdout is None:
                raise HoldoutError(f"held-out check {spec.name!r} has no tests (`from` is empty)")
            stack.enter_context(copied_in(holdout, workdir))
            obs = observe_command(
                spec.parser,
                workdir=workdir,
                command=command,
                file=file,
                options=spec.options,
                timeout_s=spec.timeout_s,
                deadline=deadline,
                sandbox=sandbox,
                extra_env=extra_env,
            )
    except HoldoutError as exc:
        obs = Observation(
            parser=spec.parser, ok=False, error=str(exc), facts=freeze(empty_facts_of(spec.parser))
        )
    return sealed(obs) if seal else obs


def _tampered(parser_name: str, message: str, *, exit_code: int | None = None) -> Observation:
    """A check refused because what it would trust changed under it: not ok, and (for a
    test parser) not consistent, so no exit condition can hold on it."""
    obs = _failed(parser_name, message)
    facts = dict(obs.facts)
    if "consistent" in facts:
        facts.update(consistent=False, tampering=message)
    return dataclasses.replace(obs, facts=freeze(facts), exit_code=exit_code)


def _entries(directory: Path) -> frozenset[str]:
    with contextlib.suppress(OSError), safefs.opened_dir(directory) as fd:
        return frozenset(os.listdir(fd))
    return frozenset()


def _remove_new(directory: Path, before: frozenset[str]) -> None:
    """Anything the held-out command added to ``directory`` (a report naming its tests)."""
    with contextlib.suppress(OSError), safefs.opened_dir(directory) as fd:
        for name in set(os.listdir(fd)) - before:
            with contextlib.suppress(OSError):
                safefs.remove_entry(fd, name, strict=True)


def _remove_file(path: Path) -> None:
    with contextlib.suppress(OSError), safefs.opened_dir(path.parent) as fd:
        safefs.remove_entry(fd, path.name, strict=True)
