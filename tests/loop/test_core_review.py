"""Loop-core defects found by reading the engine, each proved on a real git work tree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from loop_helpers import FINISHED, Rig, make_template, rule, write

from looprun.errors import ModelError
from looprun.journal.writer import RunJournal
from looprun.models.scripted import ScriptedModel
from looprun.template.model import Limits, PlanSpec


class CountingYes:
    """A person who approves every time they are asked, and is counted."""

    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    def ask(self, paths: list[str], diff: str) -> bool:
        self.asked.append(list(paths))
        return True


def test_an_interactive_approval_is_remembered_for_later_iterations(rig: Rig) -> None:
    approver = CountingYes()
    template = make_template(approve=["value.txt"])
    result = rig.run(
        template, [write("worse"), FINISHED, write("good"), FINISHED], approver=approver
    )
    assert result.outcome == "done" and result.iterations == 2
    # value.txt was approved in iteration 1: the person is not asked again in iteration 2
    assert approver.asked == [["value.txt"]]


def test_a_tree_with_a_diff_violation_is_never_last_green(rig: Rig) -> None:
    cheat = {
        "tool_calls": [
            {"name": "write_file", "arguments": {"path": "value.txt", "content": "good\n"}},
            {"name": "write_file", "arguments": {"path": "x.py", "content": "breakpoint()\n"}},
        ]
    }
    refine = [rule("policy.violations > 0", "rollback", "{{ policy.summary }}")]
    template = make_template(
        forbidden=["breakpoint()"], refine=refine, limits=Limits(max_iterations=1)
    )
    result = rig.run(template, [cheat, FINISHED])
    assert result.outcome == "exhausted"
    # the check passed, but the tree broke the act constraints: rolling back to the last
    # green state removes the violation instead of keeping it
    assert not (rig.workdir / "x.py").exists()
    assert rig.read() == "bad\n"


class PlannerFailsOnReplan:
    """The scripted model, except that the second planning call fails as a provider does."""

    def __init__(self, script: ScriptedModel):
        self.script, self.ref, self.plan_calls = script, script.ref, 0

    @property
    def position(self) -> int:
        return self.script.position

    def seek(self, position: int) -> None:
        self.script.seek(position)

    def complete(self, messages: Any, tools: Any, **kw: Any) -> Any:
        if kw.get("role") == "plan":
            self.plan_calls += 1
            if self.plan_calls > 1:
                raise ModelError("plan model: HTTP 400 bad request")
        return self.script.complete(messages, tools, **kw)


def test_a_failed_replan_still_records_the_iteration_that_asked_for_it(rig: Rig) -> None:
    plan = {"text": json.dumps({"tasks": [{"id": "a", "goal": "make value.txt good"}]})}
    model = PlannerFailsOnReplan(ScriptedModel([plan, write("worse"), FINISHED]))
    template = make_template(
        plan=PlanSpec("model"), refine=[rule("check.ok == false", "replan", "try again")]
    )
    result = rig.run(template, [], model=model)  # type: ignore[arg-type]
    assert (result.outcome, result.code) == ("error", "ModelError")
    assert "HTTP 400" in result.reason
    # the iteration ran (a tool call, a check, a decision): its record must exist
    run_dir = Path(result.run_dir)
    assert (run_dir / "observe" / "1.json").exists()
    events = RunJournal.open(rig.workdir, result.run_id).events()
    assert [e["iteration"] for e in events if e["event"] == "iteration"] == [1]
    state = json.loads((run_dir / "state.json").read_text())
    assert state["iterations"] == 1 and state["attempts"]
