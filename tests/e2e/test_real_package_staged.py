"""Staged checks on a real package: `looprun bugfix` (whose Python pack runs the tests
the last run named as failing, the tests `reproduce` made fail and the changed test files
before the whole suite) on `inflection` with a planted bug.

A change that passes the narrow selection while breaking another test never ends done;
nor does editing the selected test; a kill during a narrow stage resumes to done; the
honest script ends done, and only on a whole run of the suite.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from e2e_helpers import looprun, tiered_bugfix
from real_package import (
    BUG,
    NEW_TEST,
    NEW_TEST_ID,
    PACKAGE,
    edit_turns,
    planted_project,
    reproduce_turns,
    run_bugfix,
    run_events,
    run_suite,
)

from looprun.system.crashpoint import ENV as CRASH_ENV

CODE = f"{PACKAGE}/__init__.py"
# a first attempt that changes the code but not the answer for 13: the narrow run fails
NO_FIX = ("    if number % 100 in (11, 12):\n", "    if number % 100 in (12, 11):\n")


def _records(summary: dict[str, Any]) -> list[dict[str, Any]]:
    run = Path(summary["run_dir"]) / "observe"
    numbered = sorted(run.glob("[0-9]*.json"), key=lambda p: int(p.stem))
    return [json.loads(p.read_text()) for p in numbered]


def test_honest_fix_ends_done_on_a_whole_run(sdist: Path, tmp_path: Path) -> None:
    work = planted_project(sdist, tmp_path)
    turns = [
        *reproduce_turns(),
        *edit_turns(CODE, *NO_FIX, "Fixed ordinal."),
        *edit_turns(CODE, NO_FIX[1], BUG[0], "Fixed ordinal, really."),
    ]
    summary = run_bugfix(
        work, tmp_path, turns, "--set", "lint=false", template=tiered_bugfix(tmp_path)
    )

    assert (summary["outcome"], summary["iterations"]) == ("done", 3), summary["stderr"]
    # observe/0.json is the baseline
    records = [r["observers"]["tests"] for r in _records(summary)][1:]
    # iteration 2: only the selection ran, and it failed - the feedback came from it
    assert records[1]["stage"] == "narrow"
    assert NEW_TEST_ID in records[1]["selected"] and NEW_TEST_ID in records[1]["failing"]
    assert len(records[1]["passing"]) + len(records[1]["failing"]) < 50
    # ... and it was not read as the rest of the suite vanishing
    iterations = run_events(summary, "iteration")
    assert iterations[1]["decision"]["action"] == "retry"
    # reproduce ended on its narrow run, as the fix task follows it; the run's done was
    # decided on a whole run
    assert [e["decision"]["action"] for e in iterations] == ["done", "retry", "done"]
    assert records[0]["stage"] == "narrow" and records[0]["selected"] == [NEW_TEST]
    assert records[2]["stage"] == "whole"
    assert records[2]["selected"] and len(records[2]["passing"]) > 400
    assert run_suite(work).returncode == 0


def test_passing_the_selection_while_breaking_another_test_never_ends_done(
    sdist: Path, tmp_path: Path
) -> None:
    work = planted_project(sdist, tmp_path)
    # 13 is right now, and every ordinal of a number ending in 1 is wrong: the tests
    # that failed before pass, tests outside the selection break
    broken = (BUG[1], "    if number % 100 in (11, 12, 13) or number % 10 == 1:\n")
    turns = [*reproduce_turns(), *edit_turns(CODE, *broken, "Fixed ordinal.")]
    summary = run_bugfix(
        work, tmp_path, turns, "--set", "lint=false", "--max-iterations", "3",
        template=tiered_bugfix(tmp_path),
    )  # fmt: skip

    assert summary["outcome"] != "done", summary["stderr"]
    record = _records(summary)[2]["observers"]["tests"]
    # the package's tests import it whole: the tests naming `ordinal`, the function the
    # turn changed, ran after the selection passed, and failed
    assert record["stage"] == "related"
    assert record["selected"] and all("::test_ordinal" in i for i in record["selected"])
    assert NEW_TEST_ID in record["passing"] and record["failing"]


def test_editing_the_selected_test_never_ends_done(sdist: Path, tmp_path: Path) -> None:
    work = planted_project(sdist, tmp_path)
    turns = [
        *reproduce_turns(),
        *edit_turns(NEW_TEST, '== "th"', '== "rd"', "The test matches ordinal now."),
    ]
    summary = run_bugfix(work, tmp_path, turns, "--set", "lint=false", "--max-iterations", "2")

    assert summary["outcome"] != "done", summary["stderr"]
    assert '== "th"' in (work / NEW_TEST).read_text()


def test_kill_during_a_narrow_stage_resumes_to_done(sdist: Path, tmp_path: Path) -> None:
    work = planted_project(sdist, tmp_path)
    turns = [
        *reproduce_turns(),
        *edit_turns(CODE, *NO_FIX, "Fixed ordinal."),
        *edit_turns(CODE, NO_FIX[1], BUG[0], "Fixed ordinal, really."),
    ]
    # the first narrow stage is iteration 1's (the new test file); the second, iteration
    # 2's: the process is killed (SIGKILL) as that narrow run ends, before its verdict
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump(turns, sort_keys=False))
    killed = looprun(
        tiered_bugfix(tmp_path),
        "--intent",
        "ordinal() gives 'rd' for 113; numbers ending in 11, 12 and 13 take 'th'.",
        "--workdir",
        str(work),
        "--model",
        f"script:{script}",
        "--set",
        "tests_glob=test_*.py",
        "--set",
        "lint=false",
        "--json",
        env={CRASH_ENV: "observe.narrow@2"},
        timeout=1200,
    )
    assert killed.returncode == -9, killed.stderr
    runs = work / ".looprun" / "runs"
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    resumed = looprun("resume", run_dir.name, "--workdir", str(work), "--json", timeout=1200)
    summary = json.loads(resumed.stdout)
    assert summary["outcome"] == "done", resumed.stderr
    assert run_suite(work).returncode == 0
    last = _records({"run_dir": str(run_dir)})[-1]["observers"]["tests"]
    assert last["stage"] == "whole" and len(last["passing"]) > 400


LAST_TASK = """\
looprun: 1
name: reproduce-only
inputs:
  intent: {type: string, required: true}
act:
  prompt: "{{ intent }}"
  tools: [write_file, read_file]
observe:
  tests:
    run: "python -m pytest -q -p no:cacheprovider --junitxml={{ run.artifacts }}/junit.xml"
    parser: junit
    file: "{{ run.artifacts }}/junit.xml"
    narrow: [changed_tests]
exit: ["baseline.tests.newly_failing | length > 0"]
limits: {max_iterations: 2}
"""


def test_the_last_task_never_ends_on_a_narrow_run(sdist: Path, tmp_path: Path) -> None:
    """One task: the narrow run of the new test would end it, and so the run; the whole
    suite runs again on the same tree and the done is decided on that."""
    work = planted_project(sdist, tmp_path)
    template = tmp_path / "reproduce-only.yaml"
    template.write_text(LAST_TASK)
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump(reproduce_turns(), sort_keys=False))
    proc = looprun(
        str(template), "--intent", "ordinal(113) is wrong", "--workdir", str(work),
        "--model", f"script:{script}", "--json", timeout=600,
    )  # fmt: skip
    summary = json.loads(proc.stdout)
    assert (summary["outcome"], summary["iterations"]) == ("done", 1), proc.stderr
    record = _records(summary)[1]["observers"]["tests"]
    assert record["stage"] == "whole" and record["selected"] == []
    assert NEW_TEST_ID in record["failing"] and len(record["passing"]) > 400


FIX_ONE = """\
looprun: 1
name: fix-one
inputs:
  intent: {type: string, required: true}
plan: {mode: none}
act:
  prompt: "{{ intent }}"
  tools: [write_file, edit_file, read_file]
  max_steps: 4
observe:
  diff: {parser: git_diff}
exit: ["diff.lines > 0"]
refine:
  - else: {escalate: "no change"}
limits: {max_iterations: 1}
"""

OUTER_STAGED = """\
looprun: 1
name: staged-outer
inputs:
  intent: {type: string, required: true}
plan:
  mode: static
  tasks:
    - {id: reproduce, goal: "add a test that fails on the bug"}
    - {id: fix, goal: "fix the bug"}
each_task:
  uses: ./fix-one.yaml
  with: {intent: "{{ task.goal }}"}
  isolation: worktree
  parallel: 1
observe:
  tests:
    run: "python -m pytest -q -p no:cacheprovider --junitxml={{ run.artifacts }}/junit.xml"
    parser: junit
    file: "{{ run.artifacts }}/junit.xml"
    narrow: [changed_tests]
exit: ["subloops.all_done", "tests.ok"]
refine:
  - else: {escalate: "the suite does not pass"}
limits: {max_iterations: 1}
"""


def _outer_staged(work: Path, tmp_path: Path, fix: tuple[str, str]) -> dict[str, Any]:
    (tmp_path / "fix-one.yaml").write_text(FIX_ONE)
    template = tmp_path / "staged-outer.yaml"
    template.write_text(OUTER_STAGED)
    script = tmp_path / "script.yaml"
    parts = {"reproduce": reproduce_turns(), "fix": edit_turns(CODE, *fix, "Fixed.")}
    script.write_text(yaml.safe_dump({"tasks": parts}, sort_keys=False))
    proc = looprun(
        str(template), "--intent", "ordinal(113) is wrong", "--workdir", str(work),
        "--model", f"script:{script}", "--json", timeout=900,
    )  # fmt: skip
    summary = json.loads(proc.stdout)
    summary["stderr"] = proc.stderr
    return summary


def test_an_outer_loop_never_ends_done_on_a_narrow_run(sdist: Path, tmp_path: Path) -> None:
    """An each_task outer loop whose sub-loops pass the narrow selection (the new test)
    while breaking tests outside it: its act step ends every task at once, so a narrow
    done would end the run; the whole suite runs on the same tree and refuses it."""
    work = planted_project(sdist, tmp_path)
    broken = (BUG[1], "    if number % 100 in (11, 12, 13) or number % 10 == 1:\n")
    summary = _outer_staged(work, tmp_path, broken)

    assert summary["outcome"] != "done", summary["stderr"]
    record = _records(summary)[-1]["observers"]["tests"]
    # the narrow run of the new test passed; the whole suite ran after it on that tree
    assert record["stage"] == "whole" and record["selected"] == [NEW_TEST]
    assert NEW_TEST_ID in record["passing"] and len(record["passing"]) > 400
    assert record["failing"]
    assert all(NEW_TEST not in test for test in record["failing"])


def test_an_honest_outer_loop_ends_done_on_a_whole_run(sdist: Path, tmp_path: Path) -> None:
    work = planted_project(sdist, tmp_path)
    summary = _outer_staged(work, tmp_path, (BUG[1], BUG[0]))

    assert summary["outcome"] == "done", summary["stderr"]
    record = _records(summary)[-1]["observers"]["tests"]
    assert record["stage"] == "whole" and len(record["passing"]) > 400
    assert not record["failing"] and run_suite(work).returncode == 0
