"""Real git work trees, real tools and real subprocess checks behind the loop's ports.

Templates are built directly from ``looprun.template.model`` so these tests exercise the
engine without the YAML loader. The observer port here runs the template's command with
the real process runner and reads its exit code; the observe package's own runner is
exercised end to end through the CLI in ``tests/e2e``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from looprun.checks.related import related_tests
from looprun.checks.related_items import related_items
from looprun.data.changes import FileChange
from looprun.errors import Location
from looprun.journal.writer import RunJournal
from looprun.loop.engine import RunInfo, run_loop
from looprun.loop.outcome import RunResult
from looprun.loop.ports import KeepRecent, NoApprover, Ports
from looprun.loop.state import LoopState
from looprun.models.scripted import ScriptedModel
from looprun.observe.base import Observation
from looprun.observe.normalise import normalise
from looprun.system.proc import run_process
from looprun.template.expressions import compile_condition, compile_text
from looprun.template.model import (
    Action,
    ActSpec,
    Constraints,
    Limits,
    ObserverSpec,
    PathRules,
    PlanSpec,
    Rule,
    Template,
)

HERE = Location("test.yaml", 1, 1)


def cond(src: str) -> Any:
    return compile_condition(src, HERE)


def text(src: str, shell: bool = False) -> Any:
    return compile_text(src, HERE, shell=shell)


def rule(
    condition: str | None, kind: str, message: str | None = None, target: str | None = None
) -> Rule:
    action = Action(kind, text(message) if message else None, target)  # type: ignore[arg-type]
    return Rule(cond(condition) if condition else None, action, location=HERE)


CHECK = (
    "python3 -c \"import sys; sys.exit(0 if open('value.txt').read().strip() == 'good' else 1)\""
)


def make_template(
    *,
    check: str = CHECK,
    refine: Sequence[Rule] = (),
    limits: Limits | None = None,
    commands: Sequence[str] = ("sleep *", "python3 *"),
    approve: Sequence[str] = (),
    forbidden: Sequence[str] = (),
    plan: PlanSpec | None = None,
    exit_: Sequence[str] = ("check.ok",),
) -> Template:
    constraints = Constraints(
        paths=PathRules(allow=("**",)),
        commands=tuple(commands),
        approve=tuple(approve),
        forbidden_patterns=tuple(forbidden),
        command_timeout_s=30,
    )
    return Template(
        name="test",
        source="test.yaml",
        act=ActSpec(prompt=text("Task: {{ task.goal }}"), max_steps=8, constraints=constraints),
        observe={"check": ObserverSpec("check", "exit_code", run=text(check, shell=True))},
        exit=tuple(cond(e) for e in exit_),
        refine=tuple(refine),
        limits=limits or Limits(max_iterations=4),
        plan=plan or PlanSpec(),
    )


class CommandObserver:
    """Runs the observer command for real; ok is its exit status."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.runs = 0

    def observe(
        self, spec: ObserverSpec, context: Mapping[str, Any], *, deadline: float | None, base: str
    ) -> Observation:
        self.runs += 1
        assert spec.run is not None
        res = run_process(
            spec.run.render(context),
            cwd=self.workdir,
            timeout_s=spec.timeout_s,
            shell=True,
            deadline=deadline,
        )
        return Observation(
            parser="exit_code",
            ok=res.ok,
            exit_code=res.exit_code,
            signature=normalise(res.output[-500:]),
            feedback="" if res.ok else f"exit code {res.exit_code}\n{res.output[-1000:]}",
        )

    def related_tests(self, changed: Sequence[str]) -> tuple[str, ...] | None:
        return related_tests(self.workdir, changed)

    def related_items(self, changes: Sequence[FileChange]) -> tuple[str, ...] | None:
        return related_items(self.workdir, changes)

    def varying_params(self, spec: ObserverSpec, files: Sequence[str]) -> tuple[str, ...] | None:
        return None  # no stack: a second run tells, as it does for a check of no stack

    def keeps_tree(self, spec: ObserverSpec) -> bool:
        return False  # its commands run in the working tree

    def list_ids(
        self, spec: ObserverSpec, context: Mapping[str, Any], *, base: str
    ) -> tuple[str, ...] | None:
        return None  # no stack lists its tests here: a second run tells


@dataclass
class Rig:
    """One git work tree and everything needed to run a loop in it."""

    workdir: Path
    lines: list[str] = field(default_factory=list)

    def ports(
        self,
        model: ScriptedModel,
        journal: Any,
        template: Template,
        approver: Any = None,
        base: str | None = None,
    ) -> Ports:
        from looprun.act.policy import Policy
        from looprun.act.tools import Toolbox
        from looprun.workspace.tree import Workspace

        ws = Workspace.open(self.workdir, state_dir=self.workdir / ".looprun", base=base)
        assert template.act is not None

        def toolbox(constraints: Constraints, tools: Sequence[str], *, deadline: float | None):
            return Toolbox(self.workdir, constraints, tools, deadline=deadline)

        return Ports(
            model=model,
            toolbox=toolbox,
            workspace=ws,
            guard=Policy(self.workdir, template.act.constraints),
            observer=CommandObserver(self.workdir),
            journal=journal,
            context=KeepRecent(0, 3),
            approver=approver or NoApprover(),
            report=self.lines.append,
        )

    def run(
        self,
        template: Template,
        turns: list[dict[str, Any]],
        *,
        intent: str = "fix it",
        approver: Any = None,
        journal: RunJournal | None = None,
        state: LoopState | None = None,
        model: ScriptedModel | None = None,
        approval: bool | None = None,
    ) -> RunResult:
        from looprun.loop.engine import Engine

        journal = journal or RunJournal.create(self.workdir)
        model = model or ScriptedModel(turns)
        ports = self.ports(model, journal, template, approver, base=state.base if state else None)
        info = RunInfo(journal.run_id, str(journal.dir), str(journal.artifacts), str(self.workdir))
        try:
            if approval is not None or state is not None:
                return Engine(
                    template, ports, inputs={"intent": intent}, run=info, state=state
                ).run(approval=approval)
            return run_loop(template, ports, inputs={"intent": intent}, run=info)
        finally:
            journal.close()

    def read(self, name: str = "value.txt") -> str:
        return (self.workdir / name).read_text()


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def init_repo(path: Path, files: Mapping[str, str]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(content)
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    return path


def new_rig(tmp_path: Path) -> Rig:
    return Rig(init_repo(tmp_path / "repo", {"value.txt": "bad\n", ".gitignore": ".looprun/\n"}))


def write(value: str) -> dict[str, Any]:
    return {
        "tool_calls": [
            {"name": "write_file", "arguments": {"path": "value.txt", "content": value + "\n"}}
        ]
    }


FINISHED = {"text": "I'm finished."}
