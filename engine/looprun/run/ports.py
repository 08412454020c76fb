"""Real implementations of the loop's ports that belong to no adapter package: the
observer port over the check runner, the terminal approver, the run's sandbox."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from looprun.checks import stacks
from looprun.checks.clean_tree import CheckTrees
from looprun.checks.git_diff import Snapshot
from looprun.checks.holdout import Holdout
from looprun.checks.related import related_tests, tree_text
from looprun.checks.related_items import related_items
from looprun.checks.runner import run_observer
from looprun.checks.variants import VariantStore
from looprun.data.changes import FileChange
from looprun.data.freeze import freeze
from looprun.errors import UsageError
from looprun.loop.ports import Triage
from looprun.observe.base import Observation
from looprun.observe.normalise import failure_signature
from looprun.observe.outcome_channel import LISTED
from looprun.observe.registry import empty_facts_of
from looprun.sandbox import Confinement, Sandbox, sandbox_for
from looprun.sandbox.hidden import hidden_paths
from looprun.system import safefs
from looprun.template.model import Constraints, ObserverSpec, Template

# a variant failing on an assertion is kept whatever the reproducing test raised
_ASSERTION = "AssertionError"

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
    # the run's held-out variants, which observers with `holdout.variants` run
    variants: VariantStore | None = None
    # the sandbox a check of a stack runs in, the working tree read-only (its command
    # runs in a check tree): None where the run's sandbox cannot say so for certain
    check_sandbox: Sandbox | None = None

    def observe(
        self, spec: ObserverSpec, context: Mapping[str, Any], *, deadline: float | None, base: str
    ) -> Observation:
        holdout = self.holdouts.get(spec.name)
        if spec.holdout is not None and spec.holdout.variants is not None:
            kept = self.variants.kept(spec.name) if self.variants is not None else ()
            if not kept:
                return _no_variants(spec)
            holdout = self._variant_copy(spec)
            spec = dataclasses.replace(spec, select=kept)
        return self._run(spec, context, deadline=deadline, base=base, holdout=holdout)

    def triage(
        self, spec: ObserverSpec, context: Mapping[str, Any], *, deadline: float | None, base: str
    ) -> Observation:
        """Every stored variant of ``spec`` run once, its result unsealed: for the engine's
        triage only, whose caller keeps names and messages from the loop."""
        copy = self._variant_copy(spec)
        ids = self._variant_ids(spec, copy)
        if not ids:
            return _no_variants(spec)  # a file with no test in it: nothing ran
        whole = dataclasses.replace(spec, when=None, select=ids)
        return self._run(whole, context, deadline=deadline, base=base, holdout=copy, seal=False)

    def _variant_copy(self, spec: ObserverSpec) -> Holdout:
        """The stored variants as the check copies them in: the store's directory at
        ``to``, or (``beside``) the one file where the store says it goes."""
        assert spec.holdout is not None and self.variants is not None
        source = self.variants.source(spec.name)
        file, dest = self.variants.placed(spec.name)
        if spec.holdout.variants is not None and spec.holdout.variants.beside and file and dest:
            return Holdout(spec.name, source / file, dest)
        return Holdout(spec.name, source, spec.holdout.dest)

    def _variant_ids(self, spec: ObserverSpec, copy: Holdout) -> tuple[str, ...]:
        """What selects every stored variant: the ids the stack reads from their file
        (beside the task's tests, the package's other tests must not run), or its path."""
        assert self.variants is not None
        read = stacks.get(spec.stack).tests_in if spec.stack is not None else None
        if read is None:
            return (copy.dest,)
        return read(copy.dest, self.variants.text(spec.name))

    def _run(
        self,
        spec: ObserverSpec,
        context: Mapping[str, Any],
        *,
        deadline: float | None,
        base: str,
        holdout: Holdout | None,
        seal: bool = True,
        listing: tuple[str, ...] = (),
    ) -> Observation:
        if spec.run is not None:
            safefs.remove_special(self.artifacts)  # no command writes through a planted link
        if spec.stack is not None and holdout is not None and self.trees is not None:
            self.trees.end_baseline(spec.stack)  # held-out tests never build into a seed
        ran = True  # a check that raised may have started its command
        kept = self.keeps_tree(spec)
        try:
            obs = run_observer(
                spec,
                context,
                workdir=self.workdir,
                artifacts=self.artifacts,
                base=base,
                git_dir=self.git_dir,
                deadline=deadline,
                constraints=self.constraints,
                exclude=self.excluded(),
                sandbox=self.check_sandbox if kept else self.sandbox,
                pinned=self.pinned,
                holdout=holdout,
                snapshot=self.snapshot,
                trees=self.trees,
                seal=seal,
                listing=listing,
            )
            ran = obs.ran
            return obs
        finally:
            if spec.stack is not None and ran and self.trees is not None:
                self.trees.checked(spec.stack)
            # a check that did not apply (its `when` was false) started nothing, and one
            # confined away from the working tree wrote nothing there: the workspace's
            # snapshot of the tree still holds
            if spec.run is not None and ran and not kept and self.on_command is not None:
                self.on_command()

    def keeps_tree(self, spec: ObserverSpec) -> bool:
        """Whether ``spec``'s command cannot write the working tree: a check of a stack
        runs in its check tree, and under bubblewrap the working tree is mounted
        read-only for it (Landlock before ABI 3 lets a file be truncated; no sandbox,
        anything), so there is nothing to look for after it."""
        return spec.stack is not None and self.trees is not None and self.check_sandbox is not None

    def list_ids(
        self, spec: ObserverSpec, context: Mapping[str, Any], *, base: str
    ) -> tuple[str, ...] | None:
        """The test ids ``spec``'s command names (of the files ``spec.select`` names, when
        it does), listed by its stack without running a test, on the tree, configuration
        and sandbox a run of it has; None when the stack cannot list them or the list
        could not be read whole."""
        words = stacks.get(spec.stack).listing if spec.stack is not None else None
        if not words or spec.run is None or spec.holdout is not None:
            return None
        obs = self._run(spec, context, deadline=None, base=base, holdout=None, listing=words)
        listed = obs.facts.get(LISTED)
        if obs.error or not obs.ok or obs.exit_code != 0 or not isinstance(listed, tuple):
            return None
        return tuple(str(i) for i in listed)

    def related_tests(self, changed: Sequence[str]) -> tuple[str, ...] | None:
        """Test files importing what changed, read with ``ast`` (never run); None: unsure."""
        return related_tests(self.workdir, changed)

    def related_items(self, changes: Sequence[FileChange]) -> tuple[str, ...] | None:
        """Tests naming a definition the turn changed, read with ``ast``; None: unsure."""
        return related_items(self.workdir, changes)

    def varying_params(self, spec: ObserverSpec, files: Sequence[str]) -> tuple[str, ...] | None:
        """The stack's reading of the test files, from the working tree (the run's base,
        at the baseline); None for a check of no stack or a stack that cannot tell."""
        find = stacks.get(spec.stack).varying if spec.stack is not None else None
        return find(functools.partial(tree_text, self.workdir), files) if find else None


def _no_variants(spec: ObserverSpec) -> Observation:
    """A variants check with nothing kept to run: skipped, as a false ``when`` is (the
    ``heldout`` facts say why, and the template's rules decide)."""
    return Observation(
        parser=spec.parser,
        ok=True,
        ran=False,
        feedback=f"{spec.name}: skipped (no held-out variants kept)",
        signature=failure_signature([]),
        facts=freeze(empty_facts_of(spec.parser)),
    )


@dataclass
class RealVariants:
    """The held-out variants port: the run's private store, and their triage by the
    observer that runs them."""

    store: VariantStore
    observer: RealObserver
    hidden_from_commands: str = ""  # why the sandbox cannot hide them ('' when it can)

    def unavailable(self) -> str:
        return self.hidden_from_commands

    def write(self, observer: str, file: str, text: str, dest: str = "") -> None:
        self.store.store(observer, file, text, dest)

    def triage(
        self,
        spec: ObserverSpec,
        context: Mapping[str, Any],
        *,
        expected: Sequence[str],
        deadline: float | None,
        base: str,
    ) -> Triage:
        """Keep the variants that fail on the tree now with an ``expected`` exception type,
        or on an assertion whatever the reproducing test raised (a variant that asserts
        on the code's value shows the same bug as one the code raises in): a wrong variant
        (one the unfixed code passes, or that fails for another reason) never runs again,
        so it cannot block an honest fix."""
        obs = self.observer.triage(spec, context, deadline=deadline, base=base)
        facts = obs.facts
        tests = int(facts.get("tests") or 0)
        if not obs.ran and not obs.error:
            self.store.keep(spec.name, ())
            return Triage(0, 0)
        if not obs.ran or (tests == 0 and obs.error):
            self.store.keep(spec.name, ())
            return Triage(tests, 0, obs.error or "the check did not run")
        types = facts.get("failure_types") or {}
        failing = [i for i in facts.get("failing") or () if isinstance(i, str)]
        allowed = {*expected, _ASSERTION}
        kept = [i for i in failing if i in types and str(types[i] or "") in allowed]
        self.store.keep(spec.name, kept)
        return Triage(tests, len(kept))


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
    checks: Sequence[Path] = (),
) -> Sandbox | None:
    """The sandbox a run's commands use: the workdir and the artifacts writable, the
    repository's ``.git`` (a directory, or a worktree's file and the git directory it
    names) and the state directory read-only even inside the workdir, the user's
    credential stores, the template's ``hide`` paths and the held-out tests unreadable.
    ``checks``: the run's check trees and caches (``clean_tree``), writable too: a check
    builds there, and what anything else writes there is undone before the next check."""
    pinned = (git_dir,) if git_dir is not None else ()
    confinement = Confinement(
        writable=(workdir, artifacts, *checks),
        read_only=(workdir / ".git", *pinned, workdir / ".looprun"),
        network=template.sandbox.network,
        hidden=hidden_paths(os.environ, (*template.sandbox.hide, *held_out)),
    )
    return sandbox_for(mode, confinement, warn)


def checks_sandbox(sandbox: Sandbox | None, workdir: Path) -> Sandbox | None:
    """``sandbox`` with the working tree read-only, for the checks of a stack (they run in
    their check tree, and write only there, in their caches and in the artifacts); None
    unless the backend is bubblewrap, whose read-only mount nothing in it can undo."""
    if sandbox is None or sandbox.name != "bwrap" or not dataclasses.is_dataclass(sandbox):
        return None
    conf = sandbox.confinement
    if workdir not in conf.writable:
        return None
    confined = dataclasses.replace(
        conf,
        writable=tuple(p for p in conf.writable if p != workdir),
        read_only=(workdir, *conf.read_only),
    )
    return dataclasses.replace(sandbox, confinement=confined)  # type: ignore[type-var]


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
