"""THE composition root: the one place a run's real parts are assembled.

A top-level run (``run/runner.py``), a sub-loop on a thread (``run/subrun.py``) and a
sub-loop on a Ray worker (which calls ``subrun``) all get their engine here, from the
same parts: the git workspace, the tools and policy, the check runner in the run's
sandbox, the context budget, an agent CLI where the template names one, and for an outer
loop the act step that runs its sub-loops through an executor.
"""

from __future__ import annotations

import functools
import os
import shutil
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from looprun.act.agent_role import AgentActRole
from looprun.act.mcp import McpStartError
from looprun.act.policy import Policy
from looprun.act.tools import Toolbox
from looprun.checks.clean_tree import CheckTrees, checks_home, tool_env, trees_home
from looprun.checks.holdout import denied_to_model, resolve
from looprun.checks.seeded_cache import seed_home
from looprun.checks.variants import VariantStore, heldout_root
from looprun.data.value import valueclass
from looprun.journal.runs import run_status
from looprun.journal.writer import RunJournal
from looprun.loop.context import ContextBudget
from looprun.loop.core import Loop
from looprun.loop.engine import Engine, RunInfo
from looprun.loop.ports import ContextBuilder, KeepRecent, NoApprover, Ports
from looprun.loop.state import LoopState
from looprun.models.base import Model
from looprun.run.executor import Executor
from looprun.run.ports import (
    RealObserver,
    RealVariants,
    TtyApprover,
    check_hidden,
    checks_sandbox,
    run_sandbox,
)
from looprun.run.stoppable import StoppableActor, StoppableObserver
from looprun.run.timing import GUARD_CALLS, JOURNAL_CALLS, WORKSPACE_CALLS, RunTimer
from looprun.system.proc import secret_values
from looprun.system.redact import Redactor
from looprun.template.model import Constraints, Limits, Template
from looprun.workspace.tree import Workspace

if TYPE_CHECKING:
    from looprun.run.subloops import SubLoops

Echo = Callable[[str], None]
ExecutorFactory = Callable[[int, Echo], Executor]


@valueclass
class Wiring:
    """How a run is wired beyond its template: where it is, what it may see, who answers."""

    report: Echo
    interactive: bool = False
    base: str | None = None  # the commit the run started from (resumed or a sub-loop's)
    sandbox_mode: str | None = None  # the command line's --sandbox, over the template's
    prices: Any = None
    inputs: Mapping[str, Any] = field(default_factory=dict)  # render held-out ``from``
    held_out: Sequence[str] = ()  # the outer loops' held-out tests, hidden here too
    executor: ExecutorFactory | None = None  # where an outer loop's sub-loops run
    script_key: tuple[tuple[str, int], ...] = ()  # a scripted model's place in the tree
    stop: threading.Event | None = None  # set when the outer loop stops this sub-loop
    trace: Any = None  # the run's spans (looprun.tracing.otel.RunTrace), when traced
    workspace: Workspace | None = None  # opened already (watched, at ``base``), else here
    timer: RunTimer | None = None  # times the ports for ``--json``'s ``timing``
    holdout_model: Model | None = None  # writes held-out variants; None: the plan model


@valueclass
class Session:
    """One run's assembled parts: what the engine talks to and the tree it works in."""

    template: Template
    ports: Ports
    workspace: Workspace
    run: RunInfo
    # stops the MCP servers, lets another run have the check trees, and removes the run's
    # check caches once it has ended for good (``release_checks``)
    close: Callable[[], None] = field(default=lambda: None)

    def engine(
        self,
        *,
        inputs: Mapping[str, Any],
        limits: Limits | None = None,
        state: LoopState | None = None,
        invocation: Mapping[str, Any] | None = None,
    ) -> Engine:
        return Engine(
            self.template,
            self.ports,
            inputs=inputs,
            run=self.run,
            limits=limits,
            state=state,
            invocation=invocation,
        )


def assemble(
    template: Template, workdir: Path, journal: RunJournal, act: Model, plan: Model, wiring: Wiring
) -> Session:
    """Real tools, workspace, observers and context budget for one run.

    The held-out observers' tests (their ``from`` rendered with ``wiring.inputs``) and the
    outer loops' are hidden from every command, their destination denied to every tool.
    """
    w = wiring
    # An outer template (each_task) has no act section: its tree gets default constraints.
    constraints = template.act.constraints if template.act is not None else Constraints()
    holdouts = resolve(template.observe, w.inputs, workdir)
    # variants copied beside the task's tests go to a directory known only then: their
    # name is denied wherever it is
    variant_dests = tuple(
        f"**/{s.holdout.dest}" if s.holdout.variants.beside else s.holdout.dest
        for s in template.observe.values()
        if s.holdout is not None and s.holdout.variants is not None
    )
    dests = (*(h.dest for h in holdouts.values()), *variant_dests)
    held_out = (*w.held_out, *(str(h.source) for h in holdouts.values()))
    constraints = denied_to_model(constraints, dests)
    # the variants a run writes itself: every run's store hidden from every command
    store = VariantStore(heldout_root() / journal.run_id) if variant_dests else None
    if store is not None:
        store.open()
    # watched: the tools and the observers' commands below say when they may have written
    ws = w.workspace or Workspace.open(
        workdir, state_dir=workdir / ".looprun", base=w.base, watched=True
    )
    mode = w.sandbox_mode or template.sandbox.mode
    git_dir = ws.git.git_dir
    used = sorted({spec.stack for spec in template.observe.values() if spec.stack})
    checks = checks_home(journal.run_id) if used else None
    trees = None
    if checks is not None:  # a stack's tree at the same place in every run of this tree
        trees = CheckTrees(checks, seed=seed_home(ws.workdir), stable=trees_home(ws.workdir))
        checks.mkdir(parents=True, exist_ok=True)
    hidden = (*held_out, *(() if store is None else (str(heldout_root()),)))
    sandbox = run_sandbox(
        template,
        ws.workdir,
        journal.artifacts,
        mode,
        w.report,
        git_dir,
        hidden,
        trees.writable(used) if trees is not None else (),
    )
    backend = None if sandbox is None else sandbox.name
    if held_out:
        check_hidden(template, backend)

    servers = _mcp_servers(template, ws.workdir, sandbox, w.report)

    tool_vars = tool_env(used, checks / "act-cache") if checks is not None else {}
    command_env = {**os.environ, **tool_vars} if tool_vars else None

    def toolbox(constraints: Constraints, tools: Sequence[str], *, deadline: float | None) -> Any:
        return Toolbox(
            ws.workdir,
            denied_to_model(constraints, dests),
            tools,
            deadline=deadline,
            env=command_env,
            on_write=ws.touched,
            sandbox=sandbox,
            mcp=servers,
        )

    actor = None
    agent = template.act.agent if template.act is not None else None
    if agent is not None:
        from looprun.act.agents.actor import AgentActor  # the CLIs' adapters: only for one

        actor = AgentActor(
            agent,
            constraints,
            workdir=ws.workdir,
            run_dir=journal.dir,
            artifacts=journal.artifacts,
            model=act.agent_model if isinstance(act, AgentActRole) else "",
            prices=w.prices,
            on_change=ws.touched,
            sandbox=sandbox,
        )
        if sandbox is None and mode != "off":
            w.report(
                f"note: {agent.cli} runs without an OS sandbox: the commands its own tools "
                "run can write outside the working tree and reach the network"
            )
    observer: Any = RealObserver(
        ws.workdir,
        journal.artifacts,
        git_dir,
        constraints,
        sandbox,
        ws.touched,
        excluded=lambda: ws.excluded,
        pinned=journal.dir / "pinned",
        holdouts=holdouts,
        snapshot=lambda base: ws.snapshot() if ws.base() == base else None,
        trees=trees,
        variants=store,
        check_sandbox=checks_sandbox(sandbox, ws.workdir),
    )
    variants = None
    if store is not None:
        variants = RealVariants(store, observer, _variants_hidden(backend))
    journal_port: Any = journal
    if w.trace is not None:  # the spans are made from what these ports record
        journal_port = w.trace.journal(journal)
        observer = w.trace.observer(observer)
    if w.stop is not None:
        observer = StoppableObserver(observer, w.stop)
        actor = None if actor is None else StoppableActor(actor, w.stop)
    guard: Any = Policy(ws.workdir, constraints, paths_on_diff=agent is not None)
    ws_port: Any = ws
    toolbox_port: Any = toolbox
    if w.timer is not None:
        t = w.timer
        act, plan = t.model(act, "act"), t.model(plan, "plan")
        toolbox_port, observer = t.toolbox(toolbox), t.observer(observer)
        guard = t.wrap(guard, "policy", GUARD_CALLS)
        journal_port = t.wrap(journal_port, "records", JOURNAL_CALLS)
        ws_port = t.wrap(ws, "workspace", WORKSPACE_CALLS)
    ports = Ports(
        model=act,
        plan_model=plan,
        holdout_model=w.holdout_model or plan,
        variants=variants,
        toolbox=toolbox_port,
        workspace=ws_port,
        guard=guard,
        observer=observer,
        journal=journal_port,
        context=_context(template),
        approver=TtyApprover() if w.interactive else NoApprover(),
        report=w.report,
        setup={"sandbox": {"mode": mode, "backend": backend, "network": template.sandbox.network}},
        actor=actor,
        subloops=_subloops(template, ws, w, tuple(held_out)),
    )
    run = RunInfo(journal.run_id, str(journal.dir), str(journal.artifacts), str(ws.workdir))
    closing = (
        servers.close if servers else _nothing,
        trees.close if trees else _nothing,
        functools.partial(release_checks, checks, journal.dir) if checks else _nothing,
    )
    return Session(template, ports, ws, run, close=functools.partial(_all, closing))


def release_checks(checks: Path, run_dir: Path) -> None:
    """Once a run has ended for good (``looprun resume`` has nothing left to do), its
    checks' copies go: their caches (a cargo target directory can take gigabytes) and any
    tree of its own. A run that can still be resumed keeps them: its caches hold what
    checks of the model's code built, and a resume must never take them for new ones a
    baseline would fill (and save as the repository's seed)."""
    try:
        todo = run_status(run_dir).resume
    except (OSError, ValueError):
        return
    if not todo:
        shutil.rmtree(checks, ignore_errors=True)


def _variants_hidden(backend: str | None) -> str:
    """Why held-out variants cannot be kept from this run's commands ('' when they can):
    the code under test runs in every check, so only bubblewrap, which hides a path
    from every command, keeps them out of what the model reads back."""
    if backend == "bwrap":
        return ""
    where = "without an OS sandbox" if backend is None else f"in the {backend} sandbox"
    return (
        f"commands run {where}, which cannot hide them from the code under test; only "
        "bubblewrap can"
    )


def _all(calls: Sequence[Callable[[], None]]) -> None:
    for call in calls:
        call()


def _nothing() -> None:
    return None


def _mcp_servers(template: Template, workdir: Path, sandbox: Any, report: Echo) -> Any:
    """The template's MCP servers, started (in the sandbox, for stdio ones) and listed:
    before any model call, so one that cannot start stops the run with exit 2."""
    act = template.act
    if act is None or not act.mcp or act.agent is not None:
        return None
    try:
        from looprun.act.mcp.client import McpServers
    except ImportError as exc:
        raise McpStartError(
            f"act.mcp needs the MCP SDK ({exc.name} is missing): pip install 'looprun[mcp]'"
        ) from None
    servers = McpServers(
        act.mcp, act.tools, workdir=workdir, sandbox=sandbox, redactor=Redactor(secret_values())
    )
    for note in servers.start():
        report(f"note: {note}")
    names = ", ".join(servers.offered) or "none"
    report(f"mcp: {len(act.mcp)} server(s) started; tools offered: {names}")
    return servers


def _context(template: Template) -> ContextBuilder:
    """The context budget; a budget too small for any message keeps the recent rounds."""
    budget, recent = template.context.budget_tokens, template.context.recent_rounds
    try:
        return ContextBudget(budget, recent)
    except ValueError:
        return KeepRecent(budget, recent)


def _subloops(
    template: Template, ws: Workspace, w: Wiring, held_out: tuple[str, ...]
) -> Callable[[Loop], SubLoops] | None:
    if template.each_task is None:
        return None
    executor = w.executor
    if executor is None:
        raise ValueError("an outer loop is assembled without an executor for its sub-loops")
    # the sub-loop machinery (jobs, records, journal hand-off, tarfile): only for an outer loop
    from looprun.run.subloops import SubLoops

    def subloops(loop: Loop) -> SubLoops:
        return SubLoops(
            loop,
            ws,
            executor,
            held_out=held_out,
            script_key=w.script_key,
            stop=w.stop,
            trace=w.trace,
        )

    return subloops
