"""The real implementations behind the loop's ports: the working tree, the tools, the
observers, the context budget and the approver, wired for one run."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from looprun.journal import RunJournal
from looprun.loop.ports import KeepRecent, NoApprover, Ports
from looprun.models.base import Model
from looprun.observe.base import Observation
from looprun.template.model import Constraints, ObserverSpec, Template

Echo = Callable[[str], None]


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
        click.echo("These changes touch paths that need approval: " + ", ".join(paths), err=True)
        click.echo(diff[:20_000], err=True)
        return click.confirm("Approve these changes?", default=False, err=True)


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
    executor: Any = None,
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
        executor=executor,
    )
    return ports, ws
