"""The command-line entry points of a run: load, wire, drive, report.

``run_from_cli`` starts a run, ``resume_from_cli`` continues one after a crash, a kill
or an approval pause, ``runs_from_cli`` lists them. Progress goes to stderr; with
``--json`` stdout carries only the summary object.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from looprun.checks.holdout import resolve as resolve_holdouts
from looprun.errors import EXIT_ERROR, UsageError, one_line
from looprun.journal import recorded, sealed
from looprun.journal.recorded import ResumeChoices
from looprun.journal.runs import RunStatus, list_runs, new_run_id, run_status, runs_root
from looprun.journal.writer import RunJournal
from looprun.loop.engine import Engine, RunInfo, with_iterations
from looprun.loop.inputs import build_inputs, parse_sets
from looprun.loop.outcome import RunResult
from looprun.loop.state import LoopState
from looprun.loop.verdict import left_failing, where_it_stands
from looprun.models.base import Model
from looprun.run.interrupt import record_interrupted, signals_ignored, sigterm_interrupts
from looprun.run.models import ModelEvents, price_warnings, resolve_models, roles_used
from looprun.run.ports import build_ports, check_hidden
from looprun.system.crashpoint import crash_point
from looprun.system.proc import secret_values
from looprun.system.redact import Redactor
from looprun.template.model import Template
from looprun.template.valid_cache import file_digest


def _err(line: str) -> None:
    click.echo(line, err=True)


def _interactive() -> bool:
    return sys.stdin.isatty() and sys.stderr.isatty()


def _load(ref: str) -> Template:
    from looprun.template.loader import load_template

    return load_template(ref)


def _bind_numbers(ref: str, template: Template, sets: Mapping[str, Any], inputs: Any) -> Template:
    """The template again, if a number it reads from an input (``{{ inputs.NAME }}``) was
    given with ``--set``: the value is checked where it is used, like the default was."""
    from looprun.template.loader import load_template

    named = {n for n in template.input_numbers.values() if n in sets}
    if not named:
        return template
    return load_template(ref, given={n: inputs[n] for n in named})


def resolve_ref(ref: str) -> str:
    """A template path made absolute (resume runs from anywhere); built-in names stay."""
    p = Path(ref).expanduser()
    return str(p.resolve()) if p.exists() else ref


def _workdir(path: str) -> Path:
    wd = Path(path).expanduser().resolve()
    if not wd.is_dir():
        raise UsageError(f"--workdir {path}: not a directory")
    return wd


def _emit(result: RunResult, as_json: bool, ws: Any = None) -> int:
    if as_json:
        click.echo(json.dumps(result.summary(), indent=2))
    elif not result.finished:
        for line in where_it_stands(result, ws):
            _err(line)
    if result.finished:  # on stderr with --json too: a green verdict names what it left
        for line in left_failing(result.still_failing):
            _err("  " + line)
    return result.exit_code


def _commit_step(
    engine: Engine, ws: Any, journal: RunJournal, invocation: Mapping[str, Any], template: Template
) -> bool:
    """``--commit`` after a done run: a step of the run, recorded before and after, so a
    run killed anywhere in it gets its commit exactly once on ``looprun resume``; False
    when git or a hook refused the commit (a resume tries again).

    The intent (parent, message, paths) is saved in the state first; the ``commit``
    journal event and the commit's sha in the state follow it. A resumed step whose
    commit is already HEAD (made before the kill: on top of the recorded parent, with
    this run's ``Looprun-Run`` trailer) adopts it instead of committing again.
    """
    from looprun.workspace.commit import CommitRefused, commit_message, commit_paths

    st = engine.state
    if st.commit is None:
        # Only what the run changed: the user's own uncommitted work stays uncommitted.
        changed = ws.changed_files(st.base or None)
        if not changed:
            st.commit = {"skipped": "nothing changed"}
            engine.save()
            _err("nothing changed: no commit made")
            return True
        stop = st.stop or {}
        message = Redactor(secret_values()).text(
            commit_message(
                template.name,
                str(invocation.get("intent") or ""),
                journal.run_id,
                iterations=st.iterations,
                reason=str(stop.get("reason", "")),
            )
        )
        st.commit = {"parent": ws.git.head() or "", "message": message, "paths": changed}
        engine.save()
    rec = st.commit
    if rec.get("sha") or rec.get("skipped"):
        return True
    crash_point("commit.before")
    recorded = [
        e
        for e in journal.events()
        if e.get("event") == "commit" and e.get("parent") == rec["parent"]
    ]
    if recorded:  # made and journaled; only the state did not hear of it
        rec["sha"] = recorded[-1]["sha"]
        engine.save()
        return True
    sha = ws.made_commit(rec["parent"], journal.run_id)
    adopted = sha is not None
    if sha is None:
        try:
            sha = commit_paths(
                ws.workdir, rec["message"], rec["paths"], verify=not invocation.get("no_verify")
            )
        except CommitRefused as exc:
            _err(f"looprun: {exc}")
            return False
    else:  # made before a kill: its index update may not have happened
        ws.reset_index(rec["paths"])
    crash_point("commit.before-event")
    journal.event(
        "commit", sha=sha, parent=rec["parent"], files=list(rec["paths"]), adopted=adopted
    )
    rec["sha"] = sha
    engine.save()
    _err(f"committed {sha[:12]} to the current branch ({len(rec['paths'])} file(s))")
    return True


def _check_sandbox(template: Template, cli_mode: str | None) -> None:
    """``required`` on a host without a sandbox stops here, before anything starts (exit
    2); ``auto`` says so later, once the run has begun."""
    from looprun.sandbox import pick

    if (cli_mode or template.sandbox.mode) == "required":
        pick("required", _err)


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


def run_from_cli(**options: Any) -> int:
    """``looprun TEMPLATE --intent ...``: returns the outcome's exit code."""
    options = {**options, "intent": read_intent(options.get("intent"), options.get("intent_file"))}
    workdir = _workdir(options.get("workdir") or ".")
    if options.get("commit"):  # refuse before spending a token, not after the work
        from looprun.workspace.commit import current_branch

        current_branch(workdir)
    ref = resolve_ref(options["template"])
    template = _load(ref)
    sets = parse_sets(options.get("sets") or ())
    inputs = build_inputs(template.inputs, options.get("intent"), sets)
    template = _bind_numbers(ref, template, sets, inputs)
    events = ModelEvents()
    act, plan, refs = resolve_models(
        template, options.get("model"), options.get("plan_model"), options.get("base_url"), events
    )
    _check_sandbox(template, options.get("sandbox"))
    if resolve_holdouts(template.observe, inputs, workdir):  # a wrong path stops here
        from looprun.sandbox import pick

        mode = options.get("sandbox") or template.sandbox.mode
        backend = pick(mode, lambda _line: None) if mode != "off" else None
        check_hidden(template, None if backend is None else backend.name)
    options = {**options, "executor": _executor_spec(options.get("executor"))}
    _executor_factory(options)  # a bad --executor or a missing Ray stops here, before the run
    from looprun.workspace.lock import RunLock

    run_id = new_run_id()
    with RunLock(workdir / ".looprun", run_id):
        return _start(
            template, workdir, run_id, ref, inputs, sets, refs, act, plan, events, options
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
    }
    _save_invocation(journal, _repository(workdir), invocation)
    with journal:
        return _drive(
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
        )


def _drive(
    template: Template,
    workdir: Path,
    journal: RunJournal,
    inputs: Mapping[str, Any],
    invocation: Mapping[str, Any],
    act: Model,
    plan: Model,
    *,
    as_json: bool,
    state: LoopState | None,
    approval: bool | None,
    events: ModelEvents | None = None,
    status: RunStatus | None = None,
) -> int:
    report = _err
    ports, ws = build_ports(
        template,
        workdir,
        journal,
        act=act,
        plan=plan,
        report=report,
        interactive=_interactive() and not as_json,
        base=state.base if state is not None and state.base else None,
        sandbox_mode=invocation.get("sandbox"),
        prices=_prices(events),
        executor=_executor_factory(invocation) if template.each_task is not None else None,
        inputs=inputs,
    )
    model = (
        f"model {ports.model.ref}" if ports.model.ref else "no model: its sub-loops run agent CLIs"
    )
    _err(f"looprun {template.name}: run {journal.run_id} in {workdir} ({model})")
    for lock in ws.clear_stale_locks(journal.run_id):  # we hold the run lock: theirs is dead
        note = f"removed {lock}, left behind by a run that was killed"
        _err("note: " + note)
        journal.event("warning", message=note)
    run = RunInfo(journal.run_id, str(journal.dir), str(journal.artifacts), str(workdir))
    limits = with_iterations(template.limits, invocation.get("max_iterations"))
    if events is not None:
        for warning in price_warnings(
            invocation.get("models") or {},
            events.config,
            limits.max_cost_usd,
            roles_used(template),
        ):
            _err("warning: " + warning)
            journal.event("warning", message=warning)
    started, elapsed0 = time.monotonic(), state.elapsed_s if state is not None else 0.0
    engine = Engine(
        template, ports, inputs=inputs, run=run, limits=limits, state=state, invocation=invocation
    )
    commit = bool(invocation.get("commit"))
    if state is not None and state.stop is not None and status is not None:
        # the run has ended; a kill left only its summary or its commit to write down
        result = engine.finish_recorded(
            summary=status.summary_missing, event=_unrecorded_end(journal)
        )
        committed = True
        if commit and result.finished:
            committed = _commit_step(engine, ws, journal, invocation, template)
        code = _emit(result, as_json, ws)
        return code if committed else EXIT_ERROR
    try:
        with sigterm_interrupts():
            result = engine.run(approval=approval)
    except KeyboardInterrupt as exc:
        with signals_ignored():  # a second Ctrl-C must not tear the record of the first
            result = record_interrupted(
                engine, ws, journal, exc, elapsed0 + time.monotonic() - started
            )
            report(f"→ interrupted after {result.iterations} iteration(s): {result.reason}")
        _step_summary(journal.dir)
        _emit(result, as_json, ws)
        return result.exit_code
    committed = True
    if commit and result.finished:
        committed = _commit_step(engine, ws, journal, invocation, template)
    _step_summary(journal.dir)
    code = _emit(result, as_json, ws)
    return code if committed else EXIT_ERROR


def _repository(workdir: Path) -> Any:
    """The git repository of the workdir, as the run's workspace opens it."""
    from looprun.workspace.tree import Workspace

    return Workspace.open(workdir, state_dir=workdir / ".looprun").git


def _save_invocation(journal: RunJournal, git: Any, invocation: Mapping[str, Any]) -> None:
    """``run.json``, sealed first (see :mod:`looprun.journal.sealed`): a kill between the
    two leaves the new seal beside the previous file, which a resume refuses (saying how
    to restore it), never a file nothing vouches for."""
    sealed.seal(git, journal.run_id, journal.invocation_text(invocation))
    journal.save_invocation(invocation)


def _step_summary(run_dir: Path) -> None:
    """In GitHub Actions, append the run's Markdown report to the job's summary page."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return
    from looprun.errors import LooprunError
    from looprun.report import build_report, render

    try:
        text = render(build_report(run_dir), "md")
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text + "\n")
    except (OSError, LooprunError) as exc:  # the run's outcome stands; say so and go on
        _err(f"warning: could not append the report to GITHUB_STEP_SUMMARY ({path}): {exc}")


def _unrecorded_end(journal: RunJournal) -> bool:
    """The final state was saved, but its ``run_finished`` event was not written."""
    state = journal.load_state() or {}
    seq = int(state.get("journal_seq", 0))
    return not any(
        e.get("event") == "run_finished" and int(e.get("seq", 0)) > seq for e in journal.events()
    )


def _prices(events: ModelEvents | None) -> Any:
    from looprun.models.pricing import PriceTable

    return PriceTable(events.config.prices) if events is not None else None


def _executor_spec(option: str | None) -> str:
    """Where sub-loops run: ``--executor`` > ``LOOPRUN_EXECUTOR`` > local threads."""
    spec = option or os.environ.get("LOOPRUN_EXECUTOR") or "local"
    if spec != "local" and spec.partition(":")[0] != "ray":
        raise UsageError(f"--executor {spec}: expected local, ray or ray:ADDRESS")
    return spec


def _executor_factory(invocation: Mapping[str, Any]) -> Any:
    spec = invocation.get("executor") or "local"
    if spec == "local":
        return None
    from looprun.remote.ray_executor import RaySettings

    return RaySettings.parse(spec, remote=invocation.get("sync_remote")).factory()


def resume_from_cli(
    *,
    run_id: str,
    workdir: str | None,
    approve: bool,
    reject: bool,
    as_json: bool,
    choices: ResumeChoices | None = None,
) -> int:
    """``looprun resume RUN_ID``: continue from the last completed step, or write down
    what a kill left unwritten at the end (the summary, the ``--commit`` commit).

    The recorded ``run.json`` is checked against ``choices`` (the command line) first:
    see :mod:`looprun.journal.recorded`."""
    choices = choices or ResumeChoices()
    if approve and reject:
        raise UsageError("--approve and --reject exclude each other")
    from looprun.workspace.lock import RunLock

    wd = _workdir(workdir or ".")
    journal = RunJournal.open(wd, run_id)
    with RunLock(wd / ".looprun", journal.run_id), journal:
        status = run_status(journal.dir)  # the same reading `looprun runs` shows
        approval = True if approve else False if reject else None
        raw = status.state
        if raw is not None and raw.get("pending"):
            if approval is None:
                raise UsageError(
                    f"run {journal.run_id} waits for approval of "
                    f"{', '.join(raw['pending'].get('paths', []))}; "
                    "resume with --approve or --reject"
                )
        elif not status.resume:
            raise UsageError(
                f"run {journal.run_id} already ended {status.outcome}: {status.reason}; "
                "nothing to resume"
            )
        elif approval is not None:
            raise UsageError(f"run {journal.run_id} is not waiting for an approval")
        git = _repository(wd)
        invocation = recorded.against_seal(
            journal.load_invocation(),
            sealed.unseal(git, journal.run_id),
            journal.dir / "run.json",
            journal.run_id,
        )
        state = LoopState.from_dict(raw) if raw is not None else None
        if state is None:
            _err(f"run {journal.run_id} was killed before its first step was saved; starting again")
            if journal.seq:  # what the killed start wrote is superseded by the new start
                journal.event(
                    "resumed",
                    iteration=0,
                    task_index=0,
                    superseded={"from_seq": 1, "to_seq": journal.seq},
                )
        elif state.pending is None and state.stop and state.stop.get("outcome") != "error":
            _err(f"run {journal.run_id} ended {status.outcome}; left to do: {status.resume}")
        else:
            state.stop = None
            _err(f"resuming run {journal.run_id} after iteration {state.iterations}")
        if choices.executor is not None:  # sub-loops may resume elsewhere than they started
            invocation = {**invocation, "executor": _executor_spec(choices.executor)}
        if choices.sync_remote is not None:
            invocation = {**invocation, "sync_remote": choices.sync_remote}
        if choices.template is not None:
            invocation = {**invocation, "template": choices.template}
        template = _load(invocation["template"])
        invocation = recorded.template_unchanged(
            invocation, template.source, choices.template is not None, journal.run_id
        )
        invocation = {
            **invocation,
            "sandbox": recorded.sandbox_mode(
                invocation.get("sandbox"), template.sandbox.mode, choices.sandbox, journal.run_id
            ),
            "base_url": recorded.base_url(
                invocation.get("base_url"), choices.base_url, os.environ, journal.run_id
            ),
        }
        _save_invocation(journal, git, invocation)  # the checked choices, sealed again
        _err(recorded.shown(invocation))
        _check_sandbox(template, invocation.get("sandbox"))
        inputs = build_inputs(
            template.inputs, invocation.get("intent"), invocation.get("sets") or {}
        )
        template = _bind_numbers(
            invocation["template"], template, invocation.get("sets") or {}, inputs
        )
        models = invocation.get("models") or {}
        events = ModelEvents()
        events.journal = journal
        act, plan, _ = resolve_models(
            template, models.get("act"), models.get("plan"), invocation.get("base_url"), events
        )
        return _drive(
            template,
            wd,
            journal,
            inputs,
            invocation,
            act,
            plan,
            as_json=as_json,
            state=state,
            approval=approval,
            events=events,
            status=status,
        )


def runs_from_cli(*, workdir: str | None, as_json: bool) -> int:
    """``looprun runs``: every run in the workdir with its outcome."""
    wd = _workdir(workdir or ".")
    rows = list_runs(wd)
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in rows], indent=2))
        return 0
    if not rows:
        click.echo(f"no runs under {runs_root(wd)}")
        return 0
    from looprun.report.text import duration

    click.echo(f"runs under {runs_root(wd)}:", err=True)  # stdout: the table alone

    table = [
        ("RUN", "STARTED", "DURATION", "ITER", "TOKENS", "COST", "OUTCOME", "TEMPLATE", "RESUME")
    ]
    for r in rows:
        table.append(
            (
                r.run_id,
                r.started.replace("T", " ") or "?",
                duration(r.duration_s),
                str(r.iterations),
                f"{r.tokens:,}",
                f"${r.cost_usd:.4f}",
                r.outcome,
                Path(r.template).name,
                f"resume: {r.resume}" if r.resume else "nothing to resume",
            )
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    right = {2, 3, 4, 5}  # numbers line up on the right
    for n, row in enumerate(table):
        cells = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        reason = "" if n == 0 else one_line(rows[n - 1].reason)
        click.echo(("  ".join(cells) + ("  " + reason if reason else "")).rstrip())
    return 0
