"""The loop's semantics on real git work trees with real tools and real check commands."""

from __future__ import annotations

import json
from pathlib import Path

from loop_helpers import FINISHED, Rig, cond, make_template, rule, write

from looprun.errors import EXIT_DONE, EXIT_EXHAUSTED, EXIT_STALLED
from looprun.journal.writer import RunJournal
from looprun.loop.state import LoopState
from looprun.template.model import Limits


def test_claiming_done_without_a_fix_does_not_end_the_run(rig: Rig) -> None:
    # no-progress detection off: the iteration cap is what must stop it
    limits = Limits(max_iterations=3, max_repeats=None)
    result = rig.run(make_template(limits=limits), [FINISHED, FINISHED])
    assert result.outcome == "exhausted"
    assert result.code == "max_iterations"
    assert result.iterations == 3
    assert result.exit_code == EXIT_EXHAUSTED
    assert rig.read() == "bad\n"


def test_wrong_first_attempt_then_feedback_leads_to_done(rig: Rig) -> None:
    turns = [write("worse"), FINISHED, write("good"), FINISHED]
    result = rig.run(make_template(), turns)
    assert (result.outcome, result.iterations, result.exit_code) == ("done", 2, EXIT_DONE)
    assert result.reason == "exit conditions hold"
    assert rig.read() == "good\n"  # the change stays in the working tree
    run_dir = Path(result.run_dir)
    first = json.loads((run_dir / "observe" / "1.json").read_text())
    assert first["exit"] == [{"condition": "check.ok", "value": False}]
    assert first["decision"]["action"] == "retry"
    assert first["intent"] == "fix it"
    assert {row["limit"] for row in first["limits"]} >= {"max_iterations", "timeout"}
    second = json.loads((run_dir / "observe" / "2.json").read_text())
    assert second["exit"][0]["value"] is True
    assert second["next"]["action"] == "done"
    # the progress lines name what decided; the verdict gives tokens and cost
    assert rig.lines[-3].endswith("→ retry (no rule matched)"), rig.lines
    assert rig.lines[-2].endswith("→ done (exit conditions hold)"), rig.lines
    assert rig.lines[-1] == (
        "→ done after 2 iteration(s): exit conditions hold [418 tokens, $0.0000]"
    )


def test_feedback_of_a_failed_check_reaches_the_next_prompt(rig: Rig) -> None:
    from looprun.models.scripted import ScriptedModel

    model = ScriptedModel([write("worse"), FINISHED, write("good"), FINISHED])
    rig.run(make_template(), [], model=model)
    act_calls = [msgs for role, msgs in model.calls if role == "act"]
    third = act_calls[2]  # the first call of iteration 2
    user = [m.content for m in third if m.role == "user"][-1]
    assert "exit code 1" in user and "check.ok" in user
    assert "#1 main: write_file×1" in third[0].content  # the summary of earlier attempts


def test_never_fixed_ends_exhausted_with_its_state(rig: Rig) -> None:
    turns = [write("worse"), FINISHED, write("still bad"), FINISHED]
    result = rig.run(make_template(limits=Limits(max_iterations=2)), turns)
    assert result.outcome == "exhausted" and result.reason == "max_iterations reached"
    summary = json.loads((Path(result.run_dir) / "summary.json").read_text())
    assert summary["outcome"] == "exhausted"
    assert summary["tasks"] == [
        {"id": "main", "outcome": "exhausted", "iterations": 2, "reason": "max_iterations reached"}
    ]
    assert summary["state"]["changed_files"] == ["value.txt"]
    assert "exit code 1" in summary["state"]["last_failure"]
    assert "+still bad" in summary["state"]["diff"]
    assert summary["state"]["tasks_completed"] == []


def test_the_same_failing_edit_ends_stalled(rig: Rig) -> None:
    turns = [write("worse"), FINISHED] * 5
    template = make_template(limits=Limits(max_iterations=8, max_repeats=3))
    result = rig.run(template, turns)
    assert (result.outcome, result.code, result.iterations) == ("stalled", "max_repeats", 3)
    assert result.exit_code == EXIT_STALLED


def test_refine_rules_see_repeats_and_escalate(rig: Rig) -> None:
    refine = [
        rule("progress.repeats >= 2", "escalate", "same failure {{ progress.repeats }} times"),
        rule(None, "retry", "try again: {{ check.feedback }}"),
    ]
    result = rig.run(make_template(refine=refine), [write("worse"), FINISHED] * 4)
    assert (result.outcome, result.reason, result.iterations) == (
        "escalated",
        "same failure 2 times",
        2,
    )


def test_abort_rule(rig: Rig) -> None:
    result = rig.run(
        make_template(refine=[rule("iteration >= 1", "abort", "give up")]),
        [write("worse"), FINISHED],
    )
    assert (result.outcome, result.reason, result.exit_code) == ("aborted", "give up", 6)


def test_rollback_restores_the_last_green_state(rig: Rig) -> None:
    refine = [rule("check.ok == false", "rollback", "rolled back", target="base")]
    result = rig.run(
        make_template(refine=refine, limits=Limits(max_iterations=1)), [write("worse"), FINISHED]
    )
    assert result.outcome == "exhausted"
    assert rig.read() == "bad\n"


def test_per_tool_cap_trips_with_its_own_reason(rig: Rig) -> None:
    run = {"tool_calls": [{"name": "run", "arguments": {"command": "python3 -c pass"}}]}
    template = make_template(limits=Limits(max_iterations=5, per_tool={"run": 2}))
    result = rig.run(template, [run, run, run, FINISHED])
    assert (result.outcome, result.code) == ("exhausted", "per_tool.run")
    assert result.reason == "per_tool limit for run reached (2 calls)"


def test_max_tokens_trips_with_its_own_reason(rig: Rig) -> None:
    template = make_template(limits=Limits(max_iterations=10, max_tokens=60))
    result = rig.run(template, [write("worse"), FINISHED] * 10)
    assert (result.outcome, result.code) == ("exhausted", "max_tokens")
    assert result.iterations < 10


def test_an_iteration_the_budget_cannot_fund_is_not_started(rig: Rig) -> None:
    from looprun.loop.limits import Spent, before_iteration

    limits = Limits(max_iterations=10, max_tokens=1000)
    spent = Spent(iterations=3, tokens=800, last_tokens=300)
    stop = before_iteration(limits, spent)
    assert stop is not None and stop.code == "max_tokens" and "cannot fund" in stop.reason
    assert before_iteration(limits, Spent(iterations=3, tokens=600, last_tokens=300)) is None


def test_timeout_stops_a_hanging_tool_and_the_run(rig: Rig) -> None:
    import time

    hang = {"tool_calls": [{"name": "run", "arguments": {"command": "sleep 30"}}]}
    template = make_template(limits=Limits(max_iterations=5, timeout_s=1.5))
    started = time.monotonic()
    result = rig.run(template, [hang, FINISHED])
    assert time.monotonic() - started < 10
    assert (result.outcome, result.code) == ("exhausted", "timeout")


def test_policy_refusals_are_counted_and_journaled(rig: Rig) -> None:
    escape = {
        "tool_calls": [
            {"name": "write_file", "arguments": {"path": "../outside.txt", "content": "x"}},
            {"name": "run", "arguments": {"command": "python3 -c pass; rm -rf /"}},
        ]
    }
    refine = [rule("policy.violations >= 2", "abort", "{{ policy.summary }}")]
    result = rig.run(make_template(refine=refine), [escape, FINISHED])
    assert result.outcome == "aborted"
    assert not (rig.workdir.parent / "outside.txt").exists()
    events = RunJournal.open(rig.workdir, result.run_id).events()
    assert sum(e["event"] == "policy_violation" for e in events) == 2


def test_forbidden_pattern_in_the_diff_blocks_done(rig: Rig) -> None:
    cheat = {
        "tool_calls": [
            {"name": "write_file", "arguments": {"path": "value.txt", "content": "good\n"}},
            {"name": "write_file", "arguments": {"path": "x.py", "content": "breakpoint()\n"}},
        ]
    }
    template = make_template(forbidden=["breakpoint()"], limits=Limits(max_iterations=1))
    result = rig.run(template, [cheat, FINISHED])
    assert result.outcome == "exhausted"
    record = json.loads((Path(result.run_dir) / "observe" / "1.json").read_text())
    assert record["policy"]["diff_violations"] == 1
    assert record["exit"][-1] == {
        "condition": "policy: diff within the act constraints",
        "value": False,
    }


def test_approval_pauses_then_resume_approves(rig: Rig) -> None:
    template = make_template(approve=["value.txt"])
    first = rig.run(template, [write("good"), FINISHED])
    assert (first.outcome, first.code) == ("escalated", "approval")
    assert first.pending_approvals == ("value.txt",)
    journal = RunJournal.open(rig.workdir, first.run_id)
    state = LoopState.from_dict(journal.load_state() or {})
    assert state.pending is not None
    second = rig.run(template, [], journal=journal, state=state, approval=True)
    assert second.outcome == "done" and second.iterations == 1
    assert rig.read() == "good\n"


def test_approval_rejected_rolls_back(rig: Rig) -> None:
    template = make_template(approve=["value.txt"], limits=Limits(max_iterations=1))
    first = rig.run(template, [write("good"), FINISHED])
    journal = RunJournal.open(rig.workdir, first.run_id)
    state = LoopState.from_dict(journal.load_state() or {})
    second = rig.run(template, [], journal=journal, state=state, approval=False)
    assert rig.read() == "bad\n"
    assert second.outcome == "exhausted"


class Yes:
    def ask(self, paths: object, diff: str) -> bool:
        assert "+good" in diff
        return True


def test_interactive_approval(rig: Rig) -> None:
    result = rig.run(
        make_template(approve=["value.txt"]), [write("good"), FINISHED], approver=Yes()
    )
    assert result.outcome == "done"


def test_task_done_when_must_hold_too(rig: Rig) -> None:
    from loop_helpers import text

    from looprun.template.model import PlanSpec, TaskSpec

    tasks = (
        TaskSpec("first", text("make it good"), cond("check.ok")),
        TaskSpec("second", text("also add notes"), cond("iteration >= 2")),
    )
    result = rig.run(
        make_template(plan=PlanSpec("static", tasks)), [write("good"), FINISHED, FINISHED, FINISHED]
    )
    assert result.outcome == "done"
    assert [(t.id, t.outcome, t.iterations) for t in result.tasks] == [
        ("first", "done", 1),
        ("second", "done", 2),
    ]
    assert result.reason == "exit conditions hold for all 2 tasks"
