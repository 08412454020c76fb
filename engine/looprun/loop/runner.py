"""Wiring for the command line: real implementations behind the loop's ports.

``run_from_cli`` starts a run, ``resume_from_cli`` continues one after a crash, a kill
or an approval pause, ``runs_from_cli`` lists them. Progress goes to stderr; with
``--json`` stdout carries only the summary object.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from looprun.errors import LooprunError, UsageError
from looprun.journal import RunJournal, list_runs, new_run_id
from looprun.loop.engine import DIFF_CAP, Engine, RunInfo, with_iterations
from looprun.loop.inputs import build_inputs, parse_sets
from looprun.loop.outcome import RunResult, TaskResult, UsageTotals
from looprun.loop.ports import KeepRecent, NoApprover, Ports
from looprun.loop.state import LoopState
from looprun.models.base import Model
from looprun.observe.base import Observation
from looprun.template.model import Constraints, ObserverSpec, Template

Echo = Callable[[str], None]


def _err(line: str) -> None:
    click.echo(line, err=True)


# -- the real implementations behind the ports -----------------------------------------------


@dataclass
class RealObserver:
    """Runs observers with the observe runner on the real working tree."""

    workdir: Path
    artifacts: Path
    git_dir: Path | None
    constraints: Constraints | None

    def observe(
        self, spec: ObserverSpec, context: Mapping[str, Any], *, deadline: float | None, base: str
    ) -> Observation:
        from looprun.observe.runner import run_observer

        return run_observer(
            spec,
            context,
            workdir=self.workdir,
            artifacts=self.artifacts,
            base=base,
            git_dir=self.git_dir,
            deadline=deadline,
            constraints=self.constraints,
        )


class TtyApprover:
    """Shows the diff and asks, when a person is at the terminal."""

    def ask(self, paths: Sequence[str], diff: str) -> bool | None:
        _err("These changes touch paths that need approval: " + ", ".join(paths))
        _err(diff[:20_000])
        return click.confirm("Approve these changes?", default=False, err=True)


class ModelEvents:
    """The model clients' retry events, journaled and shown once the run has a journal;
    carries the config file the models were resolved with."""

    def __init__(self, config: Any = None):
        from looprun.config import load_config

        self.config = load_config() if config is None else config
        self.journal: RunJournal | None = None

    def __call__(self, event: Mapping[str, Any]) -> None:
        data = {k: v for k, v in event.items() if k != "event"}
        if self.journal is not None:
            self.journal.event(str(event.get("event") or "model_event"), **data)
        if event.get("event") == "model_retry":
            _err(
                f"model: attempt {data.get('attempt')} of {data.get('max_attempts')} failed "
                f"({data.get('reason')}); retrying in {float(data.get('delay_s') or 0):.1f} s"
            )


def _models(
    template: Template,
    model: str | None,
    plan_model: str | None,
    base_url: str | None,
    events: ModelEvents | None = None,
) -> tuple[Model, Model, dict[str, str]]:
    """The act and plan models: command line > environment > config file > template."""
    from looprun.models.registry import model_ref_for_role, resolve_model

    events = events or ModelEvents()
    # the plan role only where something asks it (plan.mode: model); else it is the act model
    roles = ("act", "plan") if template.plan.mode == "model" else ("act",)
    refs = {
        role: model_ref_for_role(
            role,
            cli_model=model,
            cli_role_models={"plan": plan_model},
            config=events.config,
            template_models=template.models,
        )
        for role in roles
    }
    refs.setdefault("plan", refs["act"])
    refs = {r: _absolute_script(v) for r, v in refs.items()}

    def resolve(ref: str) -> Model:
        return resolve_model(ref, base_url=base_url, config=events.config, on_event=events)

    act = resolve(refs["act"])
    if template.plan.mode != "model":  # nothing asks the plan role: do not demand its key
        return act, act, refs
    plan = act if refs["plan"] == refs["act"] else resolve(refs["plan"])
    return act, plan, refs


def _price_warnings(refs: Mapping[str, str], config: Any, max_cost_usd: float | None) -> list[str]:
    """Models without a price: their cost counts as 0, so max_cost_usd cannot stop them."""
    from looprun.models.pricing import PriceTable

    if max_cost_usd is None:
        return []
    table = PriceTable(config.prices)
    out = []
    for role, ref in sorted(refs.items()):
        scheme, _, name = ref.partition(":")
        if scheme in ("openai", "anthropic") and table.lookup(name) is None:
            out.append(
                f"no price known for {ref} ({role} role): its cost counts as $0, so "
                f"limits.max_cost_usd (${max_cost_usd:g}) cannot be enforced; add it under "
                "prices: in the config file"
            )
    return list(dict.fromkeys(out))


def _absolute_script(ref: str) -> str:
    if ref.startswith("script:"):
        return "script:" + str(Path(ref.removeprefix("script:")).expanduser().resolve())
    return ref


def build_ports(
    template: Template,
    workdir: Path,
    journal: RunJournal,
    *,
    act: Model,
    plan: Model,
    report: Echo,
    interactive: bool,
    base: str | None = None,
) -> tuple[Ports, Any]:
    """Real tools, workspace, observers and context budget for one run."""
    from looprun.act.policy import Policy
    from looprun.act.tools import Toolbox
    from looprun.workspace import Workspace

    # An outer template (each_task) has no act section: its tree gets default constraints.
    constraints = template.act.constraints if template.act is not None else Constraints()
    ws = Workspace.open(workdir, state_dir=workdir / ".looprun", base=base)
    try:
        from looprun.loop.context import ContextBudget

        context: Any = ContextBudget(template.context.budget_tokens, template.context.recent_rounds)
    except (ImportError, ValueError):
        context = KeepRecent(template.context.budget_tokens, template.context.recent_rounds)

    def toolbox(constraints: Constraints, tools: Sequence[str], *, deadline: float | None) -> Any:
        return Toolbox(ws.workdir, constraints, tools, deadline=deadline)

    git_dir = getattr(ws.git, "git_dir", None)
    ports = Ports(
        model=act,
        plan_model=plan,
        toolbox=toolbox,
        workspace=ws,
        guard=Policy(ws.workdir, constraints),
        observer=RealObserver(ws.workdir, journal.artifacts, git_dir, constraints),
        journal=journal,
        context=context,
        approver=TtyApprover() if interactive else NoApprover(),
        report=report,
    )
    return ports, ws


def _interactive() -> bool:
    return sys.stdin.isatty() and sys.stderr.isatty()


def _load(ref: str) -> Template:
    from looprun.template.loader import load_template

    return load_template(ref)


def _resolve_ref(ref: str) -> str:
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
    return result.exit_code


def where_it_stands(result: RunResult, ws: Any = None) -> list[str]:
    """The lines under a verdict that is not ``done``: tasks completed, what changed
    (with line counts), the last failure's first lines, and how to go on."""
    done = [t.id for t in result.tasks if t.outcome == "done"]
    lines = [f"  tasks completed: {', '.join(done) or 'none'} ({len(done)} of {len(result.tasks)})"]
    lines.append("  changed so far: " + (_diff_stat(result, ws) or "nothing"))
    failure = _failure_lines(result.last_failure)
    if failure:
        lines.append("  last failure: " + failure[0])
        lines.extend("    " + ln for ln in failure[1:])
    lines.append(f"  run: {result.run_dir}")
    if result.resumable:
        lines.append(f"  continue with: looprun resume {result.run_id}")
    return lines


def _diff_stat(result: RunResult, ws: Any) -> str:
    rows: list[tuple[str, int | None, int | None]] = []
    if ws is not None:
        try:
            rows = ws.numstat()  # against the run's recorded base
        except Exception:  # the stat is a courtesy; the file list below still says what changed
            rows = []
    if not rows:
        return ", ".join(result.diff_stat)
    shown = [
        f"{path} (binary)" if added is None else f"{path} (+{added} -{removed})"
        for path, added, removed in rows[:12]
    ]
    if len(rows) > 12:
        shown.append(f"... {len(rows) - 12} more")
    return ", ".join(shown)


def _failure_lines(text: str, keep: int = 3) -> list[str]:
    """The first lines that say something: no ``[observer]`` headers, no traceback body."""
    out = []
    for line in text.splitlines():
        if not line.strip() or line.startswith((" ", "\t")) or line.strip().startswith("["):
            continue
        out.append(line.strip() if len(line) <= 200 else line.strip()[:199] + "…")
        if len(out) == keep:
            break
    return out


def _finish(result: RunResult, ws: Any, commit: bool, template: Template) -> None:
    if commit and result.finished:
        # Only what the run changed: the user's own uncommitted work stays uncommitted.
        changed = ws.changed_files()
        if not changed:
            _err("nothing changed: no commit made")
            return
        sha = ws.commit_to_branch(f"looprun {template.name}: {result.reason}", only=changed)
        _err(f"committed {sha[:12]} to the current branch ({len(changed)} file(s))")


# -- the commands ---------------------------------------------------------------------------


def run_from_cli(**options: Any) -> int:
    """``looprun TEMPLATE --intent ...``: returns the outcome's exit code."""
    workdir = _workdir(options.get("workdir") or ".")
    ref = _resolve_ref(options["template"])
    template = _load(ref)
    sets = parse_sets(options.get("sets") or ())
    inputs = build_inputs(template.inputs, options.get("intent"), sets)
    events = ModelEvents()
    act, plan, refs = _models(
        template, options.get("model"), options.get("plan_model"), options.get("base_url"), events
    )
    from looprun.workspace import RunLock

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
        "workdir": str(workdir),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    journal.save_invocation(invocation)
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
    )
    _err(f"looprun {template.name}: run {journal.run_id} in {workdir} (model {ports.model.ref})")
    run = RunInfo(journal.run_id, str(journal.dir), str(journal.artifacts), str(workdir))
    limits = with_iterations(template.limits, invocation.get("max_iterations"))
    if events is not None:
        for warning in _price_warnings(
            invocation.get("models") or {}, events.config, limits.max_cost_usd
        ):
            _err("warning: " + warning)
            journal.event("warning", message=warning)
    started, elapsed0 = time.monotonic(), state.elapsed_s if state is not None else 0.0
    engine = Engine(template, ports, inputs=inputs, run=run, limits=limits, state=state)
    try:
        with _sigterm_interrupts():
            result = engine.run(approval=approval)
    except KeyboardInterrupt as exc:
        with _signals_ignored():  # a second Ctrl-C must not tear the record of the first
            result = _interrupted(engine, ws, journal, exc, elapsed0 + time.monotonic() - started)
            report(f"→ interrupted after {result.iterations} iteration(s): {result.reason}")
        _emit(result, as_json, ws)
        return result.exit_code
    _finish(result, ws, bool(invocation.get("commit")), template)
    return _emit(result, as_json, ws)


class Terminated(KeyboardInterrupt):
    """SIGTERM (a CI job cancelled): handled like Ctrl-C, so the run is recorded."""


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    def raise_terminated(signum: int, frame: Any) -> None:
        raise Terminated()

    try:
        previous = signal.signal(signal.SIGTERM, raise_terminated)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _signals_ignored() -> Iterator[None]:
    try:
        saved = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:
        yield
        return
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def _interrupted(
    engine: Engine, ws: Any, journal: RunJournal, exc: BaseException, elapsed: float
) -> RunResult:
    """Record a run stopped by a signal. ``state.json`` stays at the last completed step
    (nothing half-done is saved), so ``looprun resume`` redoes the interrupted iteration."""
    st = engine.state
    name = "SIGTERM" if isinstance(exc, Terminated) else "SIGINT"
    reason = (
        f"{name} during iteration {st.iterations + 1}; resume redoes it "
        "from the last completed step"
    )
    tasks = [TaskResult(**r) for r in st.task_results]
    for i, task in enumerate((st.tasks or [])[st.task_index :]):
        current = i == 0
        tasks.append(
            TaskResult(
                task.id,
                "interrupted" if current else "pending",
                st.task_iteration if current else 0,
            )
        )
    try:
        changed = tuple(ws.changed_files())
        diff = ws.diff()
    except LooprunError:
        changed, diff = (), ""
    result = RunResult(
        outcome="interrupted",
        reason=reason,
        code="interrupted",
        iterations=st.iterations,
        tasks=tuple(tasks),
        run_id=journal.run_id,
        run_dir=str(journal.dir),
        usage=UsageTotals(st.prompt_tokens, st.completion_tokens, st.cost_usd),
        duration_s=elapsed,
        last_failure=st.last_failure,
        diff_stat=changed,
        pending_approvals=tuple((st.pending or {}).get("paths", ())),
        diff=diff[:DIFF_CAP],
    )
    journal.event("interrupted", reason=reason, signal=name, iteration=st.iterations)
    journal.save_summary(result.summary())
    return result


def resume_from_cli(
    *, run_id: str, workdir: str | None, approve: bool, reject: bool, as_json: bool
) -> int:
    """``looprun resume RUN_ID``: continue from the last completed step."""
    if approve and reject:
        raise UsageError("--approve and --reject exclude each other")
    from looprun.workspace import RunLock

    wd = _workdir(workdir or ".")
    journal = RunJournal.open(wd, run_id)
    with RunLock(wd / ".looprun", journal.run_id), journal:
        invocation = journal.load_invocation()
        raw_state = journal.load_state()
        if raw_state is None:
            raise UsageError(f"run {journal.run_id} has no saved state yet; start it again")
        state = LoopState.from_dict(raw_state)
        approval = True if approve else False if reject else None
        stop = state.stop or {}
        if state.pending is not None:
            if approval is None:
                raise UsageError(
                    f"run {journal.run_id} waits for approval of "
                    f"{', '.join(state.pending.get('paths', []))}; "
                    "resume with --approve or --reject"
                )
        elif stop and stop.get("outcome") != "error":
            raise UsageError(
                f"run {journal.run_id} already ended {stop.get('outcome')}: {stop.get('reason')}"
            )
        elif approval is not None:
            raise UsageError(f"run {journal.run_id} is not waiting for an approval")
        state.stop = None
        template = _load(invocation["template"])
        inputs = build_inputs(
            template.inputs, invocation.get("intent"), invocation.get("sets") or {}
        )
        models = invocation.get("models") or {}
        events = ModelEvents()
        events.journal = journal
        act, plan, _ = _models(
            template, models.get("act"), models.get("plan"), invocation.get("base_url"), events
        )
        _err(f"resuming run {journal.run_id} after iteration {state.iterations}")
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
        )


def runs_from_cli(*, workdir: str | None, as_json: bool) -> int:
    """``looprun runs``: every run in the workdir with its outcome."""
    wd = _workdir(workdir or ".")
    rows = list_runs(wd)
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in rows], indent=2))
        return 0
    if not rows:
        click.echo(f"no runs under {wd / '.looprun' / 'runs'}")
        return 0
    for r in rows:
        click.echo(
            f"{r.run_id}  {r.outcome:<11} {r.iterations:>3} it  {Path(r.template).name}  {r.reason}"
        )
    return 0
