"""The task graph, nesting checks, the subloops facts and per-task scripts."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from looprun.errors import Location, UsageError
from looprun.loop.subloops import (
    Node,
    ScheduleError,
    TaskGraph,
    check_nesting,
    subloop_facts,
)
from looprun.models.scripted import ScriptedModel
from looprun.template.expressions import compile_condition


def test_ready_sets_follow_dependencies_in_plan_order() -> None:
    g = TaskGraph([Node("a"), Node("b"), Node("c", ("a", "b"))])
    assert g.ready(done=[], started=[]) == ["a", "b"]
    assert g.ready(done=["a"], started=["a", "b"]) == []
    assert g.ready(done=["a", "b"], started=["a", "b"]) == ["c"]


def test_earlier_done_tasks_satisfy_dependencies() -> None:
    g = TaskGraph([Node("c", ("a",))], satisfied=["a"])
    assert g.ready([], []) == ["c"]


def test_failed_dependency_blocks_transitively() -> None:
    g = TaskGraph([Node("a"), Node("b", ("a",)), Node("c", ("b",)), Node("d")])
    assert g.blocked(["a"]) == {"b": "a", "c": "a"}


@pytest.mark.parametrize(
    ("nodes", "message"),
    [
        ([Node("a", ("b",)), Node("b", ("a",))], "dependency cycle: a -> b -> a"),
        ([Node("a", ("zzz",))], "unknown task(s): zzz"),
        ([Node("a"), Node("a")], "duplicate task ids"),
    ],
)
def test_unschedulable_plans_are_refused(nodes: list[Node], message: str) -> None:
    with pytest.raises(ScheduleError, match=message.replace("(", r"\(").replace(")", r"\)")):
        TaskGraph(nodes)


def test_nesting_depth_and_cycles() -> None:
    check_nesting(["feature"], "bugfix")
    with pytest.raises(ScheduleError, match="cycle: feature -> bugfix -> feature"):
        check_nesting(["feature", "bugfix"], "feature")
    with pytest.raises(ScheduleError, match="deeper than 2"):
        check_nesting(["a", "b"], "c", max_depth=2)


def test_facts_in_conditions() -> None:
    records = {
        "a": {"outcome": "done", "template": "bugfix", "iterations": 2, "tokens": 10},
        "b": {"outcome": "conflict", "reason": "merge conflict in x.py"},
    }
    facts = subloop_facts(["a", "b", "c"], records)
    assert facts["failed"] == 1 and facts["counts"] == {"done": 1, "conflict": 1, "pending": 1}
    assert not facts["all_done"]
    cond = compile_condition("subloops.failed and not subloops.all_done", Location("t.yaml", 1, 1))
    assert cond.evaluate({"subloops": facts}) is True
    assert subloop_facts(["a"], records)["all_done"] is True


def test_per_task_scripts_with_attempts(tmp_path: Path) -> None:
    script = tmp_path / "s.yaml"
    script.write_text(
        yaml.safe_dump(
            {
                "turns": [{"text": "plan"}],
                "tasks": {
                    "a": [{"text": "a only"}],
                    "b": {"attempts": [[{"text": "b first"}], [{"text": "b second"}]]},
                    "n": {"turns": [{"text": "inner plan"}], "tasks": {"x": [{"text": "deep"}]}},
                },
            }
        )
    )

    def first(key: tuple) -> str:
        m = ScriptedModel.from_file(script, key)
        return m.complete([], []).message.content

    assert first(()) == "plan"
    assert first((("a", 1),)) == "a only"
    assert first((("b", 1),)) == "b first"
    assert first((("b", 2),)) == "b second"
    assert first((("b", 5),)) == "b second"  # the last attempt repeats
    assert first((("n", 1),)) == "inner plan"
    assert first((("n", 1), ("x", 1))) == "deep"
    with pytest.raises(UsageError, match="no entry for task 'zz'"):
        ScriptedModel.from_file(script, (("zz", 1),))


def test_plain_list_scripts_still_work(tmp_path: Path) -> None:
    script = tmp_path / "s.yaml"
    script.write_text(yaml.safe_dump([{"text": "one"}, {"text": "two"}]))
    m = ScriptedModel.from_file(script, (("any", 1),))
    assert [m.complete([], []).message.content for _ in range(2)] == ["one", "two"]
