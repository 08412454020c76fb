"""Real implementations of the loop's ports that belong to no adapter package: the
observer port over the check runner, the terminal approver, the run's sandbox."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from looprun.checks.clean_tree import CheckTrees
from looprun.checks.git_diff import Snapshot
from looprun.checks.holdout import Holdout
from looprun.checks.related import related_tests
from looprun.checks.runner import run_observer
from looprun.errors import UsageError
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
    # the workspace's snapshot of the tree now, against a base (git_diff reuses it)
    snapshot: Snapshot | None = None
    # the run's clean copies of the repository, where observers with `stack` run
    trees: CheckTrees | None = None

    def observe(
        self, spec: ObserverSpec, context: Mapping[str, Any], *, deadline: float | None, base: str
    ) -> Observation:
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
                snapshot=self.snapshot,
                trees=self.trees,
            )
        finally:
            if spec.run is not None and self.on_command is not None:
                self.on_command()

    def related_tests(self, changed: Sequence[str]) -> tuple[str, ...] | None:
        """Test files importing what changed, read with ``ast`` (never run); None: unsure."""
        return related_tests(self.workdir, changed)


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
    checks: Path | None = None,
) -> Sandbox | None:
    """The sandbox a run's commands use: the workdir and the artifacts writable, the
    repository's ``.git`` (a directory, or a worktree's file and the git directory it
    names) and the state directory read-only even inside the workdir, the user's
    credential stores, the template's ``hide`` paths and the held-out tests unreadable.
    ``checks``: the run's check trees and caches (``clean_tree``), writable too: a check
    builds there, and what anything else writes there is undone before the next check."""
    pinned = (git_dir,) if git_dir is not None else ()
    if checks is not None:
        checks.mkdir(parents=True, exist_ok=True)
    confinement = Confinement(
        writable=(workdir, artifacts, *(() if checks is None else (checks,))),
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
