"""The real implementations behind the loop's ports: the working tree, the tools, the
observers, the context budget and the approver, wired for one run."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from looprun.checks.holdout import Holdout, denied_to_model, resolve
from looprun.errors import UsageError
from looprun.journal.writer import RunJournal
from looprun.loop.ports import KeepRecent, NoApprover, Ports
from looprun.models.base import Model
from looprun.observe.base import Observation
from looprun.sandbox import Confinement, Sandbox, sandbox_for
from looprun.sandbox.hidden import hidden_paths
from looprun.system import safefs
from looprun.template.model import Constraints, ObserverSpec, Template

Echo = Callable[[str], None]


@dataclass
class RealObserver:
    """Runs observers with the observe runner on the real working tree."""

    workdir: Path
    artifacts: Path
    git_dir: Path | None
    constraints: Constraints | None
    sandbox: Sandbox | None = None
    # told after an observer's command ran (it may have written to the tree)
    on_command: Callable[[], None] | None = None
    excluded: Callable[[], tuple[str, ...]] = tuple  # report files, out of the diff
    pinned: Path | None = None  # the run's copies of what checks run with, read-only to them
    holdouts: Mapping[str, Holdout] = field(default_factory=dict)  # by observer name

    def observe(
        self, spec: ObserverSpec, context: Mapping[str, Any], *, deadline: float | None, base: str
    ) -> Observation:
        from looprun.checks.runner import run_observer

        if spec.run is not None:
            safefs.remove_special(self.artifacts)  # no command writes through a planted link
        try:
            return run_observer(
                spec,
                context,
                workdir=self.workdir,
                artifacts=self.artifacts,
                base=base,
                git_dir=self.git_dir,
                deadline=deadline,
                constraints=self.constraints,
                exclude=self.excluded(),
                sandbox=self.sandbox,
                pinned=self.pinned,
                holdout=self.holdouts.get(spec.name),
            )
        finally:
            if spec.run is not None and self.on_command is not None:
                self.on_command()


class TtyApprover:
    """Shows the diff and asks, when a person is at the terminal."""

    def ask(self, paths: Sequence[str], diff: str) -> bool | None:
        click.echo("These changes touch paths that need approval: " + ", ".join(paths), err=True)
        click.echo(diff[:20_000], err=True)
        return click.confirm("Approve these changes?", default=False, err=True)


def run_sandbox(
    template: Template,
    workdir: Path,
    artifacts: Path,
    mode: str,
    warn: Echo,
    git_dir: Path | None = None,
    held_out: Sequence[str] = (),
) -> Sandbox | None:
    """The sandbox a run's commands use: the workdir and the artifacts writable, the
    repository's ``.git`` (a directory, or a worktree's file and the git directory it
    names) and the state directory read-only even inside the workdir, the user's
    credential stores, the template's ``hide`` paths and the held-out tests unreadable."""
    pinned = (git_dir,) if git_dir is not None else ()
    confinement = Confinement(
        writable=(workdir, artifacts),
        read_only=(workdir / ".git", *pinned, workdir / ".looprun"),
        network=template.sandbox.network,
        hidden=hidden_paths(os.environ, (*template.sandbox.hide, *held_out)),
    )
    return sandbox_for(mode, confinement, warn)


def check_hidden(template: Template, backend: str | None) -> None:
    """Held-out tests are hidden from commands only by bubblewrap's mounts: a run whose
    model can start commands anywhere else - the `run` tool, or an agent CLI, which runs
    in the run's sandbox with its own shell - would let them read the tests, so it does
    not start."""
    act = template.act
    if act is None:
        return  # an outer loop: its sub-loops check for themselves
    if backend == "bwrap":
        return
    where = "without an OS sandbox" if backend is None else f"in the {backend} sandbox"
    if act.agent is not None:
        raise UsageError(
            f"a held-out check is on, but act.agent's CLI would run {where}, which cannot "
            "hide the held-out tests from the commands its own tools run; only bubblewrap "
            "can - install it (and allow user namespaces), or use the built-in tools"
        )
    if "run" in act.tools:
        raise UsageError(
            f"a held-out check is on and the act step may run commands (`run`), but they "
            f"would run {where}, which cannot hide the held-out tests from them; only "
            "bubblewrap can - install it (and allow user namespaces), or drop `run` from "
            "act.tools"
        )


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
    sandbox_mode: str | None = None,
    prices: Any = None,
    executor: Any = None,
    inputs: Mapping[str, Any] | None = None,
    held_out: Sequence[str] = (),
) -> tuple[Ports, Any]:
    """Real tools, workspace, observers and context budget for one run.

    ``sandbox_mode`` (from the command line) overrides the template's ``sandbox.mode``.
    ``inputs`` render the held-out observers' ``from``; their tests, and the outer
    loops' ``held_out``, are hidden from every command, their destination denied to
    every tool.
    """
    from looprun.act.policy import Policy
    from looprun.act.tools import Toolbox
    from looprun.workspace.tree import Workspace

    # An outer template (each_task) has no act section: its tree gets default constraints.
    constraints = template.act.constraints if template.act is not None else Constraints()
    holdouts = resolve(template.observe, inputs or {}, workdir)
    dests = tuple(h.dest for h in holdouts.values())
    held_out = (*held_out, *(str(h.source) for h in holdouts.values()))
    constraints = denied_to_model(constraints, dests)
    # watched: the tools and the observers' commands below say when they may have written
    ws = Workspace.open(workdir, state_dir=workdir / ".looprun", base=base, watched=True)
    try:
        from looprun.loop.context import ContextBudget

        context: Any = ContextBudget(template.context.budget_tokens, template.context.recent_rounds)
    except (ImportError, ValueError):
        context = KeepRecent(template.context.budget_tokens, template.context.recent_rounds)

    mode = sandbox_mode or template.sandbox.mode
    git_dir = getattr(ws.git, "git_dir", None)
    sandbox = run_sandbox(template, ws.workdir, journal.artifacts, mode, report, git_dir, held_out)
    backend = None if sandbox is None else sandbox.name
    if held_out:
        check_hidden(template, backend)
    setup = {"sandbox": {"mode": mode, "backend": backend, "network": template.sandbox.network}}

    def toolbox(constraints: Constraints, tools: Sequence[str], *, deadline: float | None) -> Any:
        return Toolbox(
            ws.workdir,
            denied_to_model(constraints, dests),
            tools,
            deadline=deadline,
            on_write=ws.touched,
            sandbox=sandbox,
        )

    actor = None
    agent = template.act.agent if template.act is not None else None
    if agent is not None:
        from looprun.act.agents.actor import AgentActor

        actor = AgentActor(
            agent,
            constraints,
            workdir=ws.workdir,
            run_dir=journal.dir,
            artifacts=journal.artifacts,
            model=str(getattr(act, "agent_model", "")),
            prices=prices,
            on_change=ws.touched,
            sandbox=sandbox,
        )
        if sandbox is None and mode != "off":
            report(
                f"note: {agent.cli} runs without an OS sandbox: the commands its own tools "
                "run can write outside the working tree and reach the network"
            )
    ports = Ports(
        model=act,
        plan_model=plan,
        toolbox=toolbox,
        workspace=ws,
        guard=Policy(ws.workdir, constraints, paths_on_diff=agent is not None),
        observer=RealObserver(
            ws.workdir,
            journal.artifacts,
            git_dir,
            constraints,
            sandbox,
            ws.touched,
            excluded=lambda: ws.excluded,
            pinned=journal.dir / "pinned",
            holdouts=holdouts,
        ),
        journal=journal,
        context=context,
        approver=TtyApprover() if interactive else NoApprover(),
        report=report,
        setup=setup,
        actor=actor,
        executor=executor,
        held_out=tuple(held_out),
    )
    return ports, ws
