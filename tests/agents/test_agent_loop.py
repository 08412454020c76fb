"""A whole looprun run with a stand-in agent CLI on PATH: the report is a claim, the diff
and the checks are the facts; policy, rollback, budgets and sessions as for any actor."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tests.e2e.e2e_helpers import run_dirs, sample_copy, summary_of
from tests.support.cli import looprun
from tests.support.fake_agent_cli import install

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "samples" / "agents" / "bugfix-claude-code.yaml"
INTENT = "division by zero in invoice totals"
FAILING_TEST = (
    "tests/test_zero.py=from invoice.totals import Line, summary\\n\\n\\n"
    "def test_zero():\\n    summary([Line('x', 0, 1)])\\n"
)


def _run(tmp_path: Path, template: Path, mode: str, *args: str) -> tuple[Path, dict, list, list]:
    work = sample_copy("invoice", tmp_path)
    bindir = tmp_path / "bin"
    install(bindir, "claude")
    log = tmp_path / "cli.jsonl"
    env = {
        "PATH": os.pathsep.join(
            (str(bindir), str(Path(sys.executable).parent), os.environ["PATH"])
        ),
        "FAKE_AGENT_MODE": mode,
        "FAKE_AGENT_LOG": str(log),
        "ANTHROPIC_API_KEY": "sk-ant-fake-key-for-tests",
        # no OS sandbox: the stand-in logs its starts outside the tree, which a sandboxed
        # CLI cannot write to (tests/agents/test_agent_sandbox.py is about that)
        "LOOPRUN_SANDBOX_BACKENDS": "",
    }
    proc = looprun(str(template), "--intent", INTENT, "--json", *args, cwd=work, env=env)
    (run,) = run_dirs(work)
    events = [json.loads(x) for x in (run / "journal.jsonl").read_text().splitlines()]
    starts = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    return work, summary_of(proc), events, starts


def _kinds(events: list, kind: str) -> list:
    return [e for e in events if e["event"] == kind]


def test_a_claim_of_success_ends_nothing_the_tests_decide(tmp_path: Path) -> None:
    # the CLI writes nothing and says "All done, the bug is fixed."
    _work, summary, events, _ = _run(tmp_path, SAMPLE, "", "--max-iterations", "2")
    assert summary["outcome"] == "exhausted"
    assert summary["code"] == "max_iterations"
    (first, _second) = _kinds(events, "agent_turn")
    assert first["final_message"] == "All done, the bug is fixed."
    assert [i["decision"]["action"] for i in _kinds(events, "iteration")] == ["retry", "retry"]


def test_a_policy_violation_in_the_diff_rolls_the_turn_back(tmp_path: Path) -> None:
    # a refine tree that would just retry: the engine still undoes an agent's bad turn
    template = tmp_path / "t.yaml"
    template.write_text(
        f"looprun: 1\nname: t\nextends: {SAMPLE}\n"
        "refine:\n  - else: {retry: '{{ tests.feedback }}'}\n"
    )
    mode = f"write:{FAILING_TEST}|write:.github/workflows/x.yml=on: push"
    work, summary, events, _ = _run(tmp_path, template, mode, "--max-iterations", "1")
    (iteration,) = _kinds(events, "iteration")
    assert iteration["decision"]["action"] == "rollback"
    assert iteration["decision"]["target"] == "previous"
    assert ".github/workflows/x.yml" in iteration["decision"]["message"]
    assert not (work / ".github").exists()  # the whole turn is undone,
    assert not (work / "tests" / "test_zero.py").exists()  # not only the offending file
    assert summary["outcome"] != "done"


def test_usage_counts_against_the_run_limits(tmp_path: Path) -> None:
    template = tmp_path / "t.yaml"
    template.write_text(f"looprun: 1\nname: t\nextends: {SAMPLE}\nlimits: {{max_tokens: 5000}}\n")
    _work, summary, _events, starts = _run(tmp_path, template, "usage:4000/1500")
    assert summary["outcome"] == "exhausted" and summary["code"] == "max_tokens"
    assert summary["usage"]["prompt_tokens"] == 4000
    assert summary["usage"]["completion_tokens"] == 1500
    assert len(starts) == 1  # no second turn once the budget is spent


def test_session_resume_continues_the_clis_session_within_a_task(tmp_path: Path) -> None:
    template = tmp_path / "t.yaml"
    template.write_text(
        f"looprun: 1\nname: t\nextends: {SAMPLE}\nact: {{agent: {{session: resume}}}}\n"
    )
    _work, _summary, events, starts = _run(tmp_path, template, "", "--max-iterations", "3")
    first, second, third = (s["argv"] for s in starts)
    assert "--session-id" in first and "--resume" not in first
    sid = first[first.index("--session-id") + 1]
    assert second[second.index("--resume") + 1] == sid
    assert third[third.index("--resume") + 1] == sid
    assert {t["session_id"] for t in _kinds(events, "agent_turn")} == {sid}
