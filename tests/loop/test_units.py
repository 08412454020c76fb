"""Refine tree, progress fingerprints, limits, planner and inputs, each on its own."""

from __future__ import annotations

import pytest
from loop_helpers import cond, make_template, rule

from looprun.errors import UsageError
from looprun.loop.inputs import build_inputs, parse_sets
from looprun.loop.limits import Spent, before_iteration, before_tool_call, check_spent
from looprun.loop.plan import PlanError, model_plan, parse_plan
from looprun.loop.progress import Progress, normalise_action
from looprun.loop.refine import decide
from looprun.models.scripted import ScriptedModel
from looprun.template.expressions import ShellCode
from looprun.template.model import InputSpec, Limits, PlanSpec, Rule

FACTS = {"tests": {"failed": 2, "feedback": "boom"}, "progress": {"repeats": 1}}


def test_first_match_wins() -> None:
    rules = [
        rule("tests.failed > 1", "retry", "many: {{ tests.feedback }}"),
        rule("tests.failed > 0", "abort", "never reached"),
    ]
    d = decide(rules, FACTS, "default")
    assert (d.kind, d.message) == ("retry", "many: boom")
    assert d.rule == "test.yaml:1"  # the rule's name: file:line, as explain shows it


def test_nested_subtree_and_fall_through() -> None:
    inner = (rule("progress.repeats > 5", "abort", "x"),)
    rules = [Rule(cond("tests.failed > 0"), children=inner), rule(None, "escalate", "else")]
    assert decide(rules, FACTS, "fb").kind == "escalate"
    inner2 = (rule("progress.repeats == 1", "rollback", "back", "previous"),)
    d = decide([Rule(cond("tests.failed > 0"), children=inner2)], FACTS, "fb")
    assert (d.kind, d.target) == ("rollback", "previous")


def test_no_matching_rule_retries_with_the_observers_feedback() -> None:
    d = decide([rule("tests.failed == 0", "abort", "x")], FACTS, "the feedback")
    assert (d.kind, d.message) == ("retry", "the feedback")


def test_actions_normalise_key_order_whitespace_and_case() -> None:
    a = normalise_action("Edit_File", {"path": "./src/a.py", "new": "x = 1  \n", "old": "x"})
    b = normalise_action("edit_file", {"old": "x", "new": "x = 1\n", "path": "src/a.py"})
    assert a == b
    assert normalise_action("edit_file", {"path": "A.py"}) != normalise_action(
        "edit_file", {"path": "a.py"}
    )  # paths are case-sensitive: not folded


def test_repeats_count_consecutive_equal_fingerprints() -> None:
    p = Progress()
    for fp, want in [("a", 1), ("a", 2), ("a", 3), ("b", 1), ("a", 1)]:
        p = p.next(fp)
        assert p.repeats == want


def test_limits_each_have_their_own_reason() -> None:
    lim = Limits(
        max_iterations=3, max_tokens=100, timeout_s=10, max_cost_usd=1.0, per_tool={"run": 1}
    )
    assert before_iteration(lim, Spent(iterations=3)).code == "max_iterations"  # type: ignore[union-attr]
    assert check_spent(lim, Spent(tokens=100)).code == "max_tokens"  # type: ignore[union-attr]
    assert check_spent(lim, Spent(cost_usd=1.0)).code == "max_cost_usd"  # type: ignore[union-attr]
    assert check_spent(lim, Spent(elapsed_s=10)).code == "timeout"  # type: ignore[union-attr]
    assert before_tool_call(lim, Spent(per_tool={"run": 1}), "run").code == "per_tool.run"  # type: ignore[union-attr]
    assert before_tool_call(lim, Spent(per_tool={"run": 1}), "read_file") is None
    slow = Spent(iterations=1, elapsed_s=6, last_duration_s=5)
    assert before_iteration(lim, slow).code == "timeout"  # type: ignore[union-attr]


PLAN_TEMPLATE = make_template(plan=PlanSpec("model", max_tasks=3))


def test_model_plan_is_checked_and_ordered() -> None:
    answer = (
        'Here: ```json\n{"tasks": [{"id": "b", "goal": "second", "depends_on": ["a"]},'
        ' {"id": "a", "goal": "first", "done_when": "check.ok and iteration < 3"}]}\n```'
    )
    tasks = parse_plan(answer, PLAN_TEMPLATE)
    assert [t.id for t in tasks] == ["a", "b"]
    assert tasks[0].done_when is not None
    assert tasks[0].done_when.evaluate({"check": {"ok": True}, "iteration": 1})


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("no json here", "no JSON"),
        ('{"tasks": [{"goal": "x"}]}', "'id' is a required property"),
        (
            '{"tasks": [{"id": "a", "goal": "x", "done_when": "tests.ok"}]}',
            "undeclared name(s) ['tests']",
        ),
        ('{"tasks": [{"id": "a", "goal": "x", "done_when": "check.ok and"}]}', "done_when"),
        ('{"tasks": [{"id": "a", "goal": "x", "depends_on": ["zz"]}]}', "unknown task"),
        ('[{"id": "a", "goal": "x"}, {"id": "a", "goal": "y"}]', "used twice"),
        (
            '[{"id": "a", "goal": "1"}, {"id": "b", "goal": "2"}, {"id": "c", "goal": "3"},'
            ' {"id": "d", "goal": "4"}]',
            "at most 3",
        ),
    ],
)
def test_malformed_plans_say_exactly_why(answer: str, problem: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_plan(answer, PLAN_TEMPLATE)
    assert problem in str(info.value)


def test_malformed_plan_gets_one_retry_with_the_error() -> None:
    model = ScriptedModel([{"text": '{"tasks": []}'}, {"text": '[{"id": "a", "goal": "x"}]'}])
    tasks = model_plan(model, PLAN_TEMPLATE, {"intent": "i"})
    assert [t.id for t in tasks] == ["a"]
    retry_prompt = model.calls[1][1][-1].content
    assert "That plan cannot be used: plan does not match the schema at tasks" in retry_prompt
    bad = ScriptedModel([{"text": "nope"}, {"text": "still nope"}])
    with pytest.raises(PlanError, match="malformed twice"):
        model_plan(bad, PLAN_TEMPLATE, {"intent": "i"})


def test_inputs_are_type_checked() -> None:
    specs = {
        "intent": InputSpec("intent", required=True),
        "n": InputSpec("n", "integer"),
        "flag": InputSpec("flag", "boolean", default=False),
        "cmd": InputSpec("cmd", "command", default="make test"),
        "paths": InputSpec("paths", "list"),
    }
    got = build_inputs(specs, "fix", parse_sets(["n=3", "flag=yes", "paths=a,b"]))
    assert got == {"intent": "fix", "n": 3, "flag": True, "cmd": "make test", "paths": ["a", "b"]}
    assert isinstance(got["cmd"], ShellCode) and not isinstance(got["intent"], ShellCode)
    # a list is comma-separated text or a JSON list, the same list either way
    for spelled in ('paths=["a", "b"]', "paths= a , b ,"):
        assert build_inputs(specs, "fix", parse_sets([spelled]))["paths"] == ["a", "b"]
    with pytest.raises(UsageError, match="not a JSON list"):
        build_inputs(specs, "x", {"paths": "[a, b]"})
    with pytest.raises(UsageError, match="expected an integer"):
        build_inputs(specs, "x", {"n": "three"})
    with pytest.raises(UsageError, match="missing required input"):
        build_inputs(specs, None, {})
    with pytest.raises(UsageError, match="unknown input"):
        build_inputs(specs, "x", {"other": "1"})
    with pytest.raises(UsageError, match="KEY=VALUE"):
        parse_sets(["novalue"])
