"""kill -9 at exact points of a real run (``LOOPRUN_CRASH_AT``, the test-only crash
points), then ``looprun resume`` or a new run through the real CLI: the tree is never
blocked, every edit is applied exactly once, the records agree."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_helpers import git_init, looprun, run_dirs, start
from tests.support.fake_provider import FakeProvider, openai_reply

from looprun.journal.read import current_events, read_jsonl

FINAL = "start\none\ntwo\n"

TEMPLATE = """\
looprun: 1
name: twostep
description: Append two lines, one per iteration.
inputs:
  intent: {type: string, required: true}
act:
  prompt: "{{ intent }} (iteration {{ iteration }})"
  tools: [edit_file, read_file]
  max_steps: 5
observe:
  check:
    run: "python check.py"
    parser: exit_code
exit: [check.ok, "policy.violations == 0"]
refine:
  - if: policy.violations > 0
    then:
      rollback: previous
      feedback: "{{ policy.summary }}"
limits: {max_iterations: 6, max_cost_usd: 5}
"""


def _edit(prev: str, line: str) -> dict[str, Any]:
    return {
        "name": "edit_file",
        "arguments": {"path": "log.txt", "old": f"{prev}\n", "new": f"{prev}\n{line}\n"},
    }


TURNS: list[dict[str, Any]] = [
    {"tool_calls": [_edit("start", "one")]},
    {"text": "added one"},
    {"tool_calls": [_edit("one", "two")]},
    {"text": "added two"},
]


def _setup(tmp: Path, turns: list[dict[str, Any]] | None = None) -> tuple[Path, list[str]]:
    work = tmp / "work"
    work.mkdir()
    (work / "log.txt").write_text("start\n")
    (work / "check.py").write_text(
        f"import sys\nsys.exit(0 if open('log.txt').read() == {FINAL!r} else 1)\n"
    )
    git_init(work)
    template = tmp / "twostep.yaml"
    template.write_text(TEMPLATE)
    script = tmp / "script.yaml"
    script.write_text(yaml.safe_dump(turns or TURNS))
    args = [
        str(template),
        "--intent",
        "append the next line",
        "--workdir",
        str(work),
        "--model",
        f"script:{script}",
        "--json",
    ]
    return work, args


def _killed_at(point: str, args: list[str]) -> None:
    """Run until the crash point kills the run's process group (as `kill -9 -PGID`)."""
    proc = start(*args, env={"LOOPRUN_CRASH_AT": point})
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL, (point, proc.returncode, err)


def _resume(work: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    [run_dir] = run_dirs(work)
    return looprun("resume", run_dir.name, "--workdir", str(work), "--json", *extra)


def _summary(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """What ``--json`` printed, without ``timing``: that is this process's own, printed
    and never recorded (summary.json has none)."""
    assert proc.stdout.strip(), proc.stderr
    printed = dict(json.loads(proc.stdout))
    printed.pop("timing", None)
    return printed


def _listed(work: Path) -> dict[str, Any]:
    [row] = json.loads(looprun("runs", "--workdir", str(work), "--json").stdout)
    return dict(row)


def _done_once(work: Path, proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert proc.returncode == 0, proc.stderr
    summary = _summary(proc)
    assert (summary["outcome"], summary["iterations"]) == ("done", 2)
    assert (work / "log.txt").read_text() == FINAL  # no edit lost, none applied twice
    return summary


# -- 1. a kill while git holds the private index lock ----------------------------------


def test_a_kill_while_git_holds_the_index_lock_does_not_block_resume(tmp_path: Path) -> None:
    work, args = _setup(tmp_path)
    _killed_at("snapshot.index-lock@3", args)
    lock = work / ".looprun" / "snapshot.index.lock"
    assert lock.exists()  # git was killed holding it
    resumed = _resume(work)
    _done_once(work, resumed)
    assert "left behind by a run that was killed" in resumed.stderr
    assert not lock.exists()


def test_a_kill_while_git_holds_the_index_lock_does_not_block_a_new_run(tmp_path: Path) -> None:
    work, args = _setup(tmp_path)
    _killed_at("snapshot.index-lock@1", args)
    assert (work / ".looprun" / "snapshot.index.lock").exists()
    fresh = looprun(*args)
    _done_once(work, fresh)


# -- 6. a torn last line in exchanges.jsonl ---------------------------------------------


def test_a_torn_exchange_line_is_cut_before_the_next_one(tmp_path: Path) -> None:
    work, args = _setup(tmp_path)
    _killed_at("torn:exchange@2", args)
    [run_dir] = run_dirs(work)
    assert not (run_dir / "exchanges.jsonl").read_text().endswith("\n")  # torn
    _done_once(work, _resume(work))
    lines = (run_dir / "exchanges.jsonl").read_text().splitlines()
    assert [json.loads(line)["reply"]["role"] for line in lines] == ["assistant"] * len(lines)
    # the first call kept, the torn second one cut; resume redoes iteration 1 (two calls)
    # and runs iteration 2 (two calls)
    assert [json.loads(line)["iteration"] for line in lines] == [1, 1, 1, 2, 2]


# -- 7. an unknown tool name is a tool error, not a violation ---------------------------


def test_an_unknown_tool_is_a_tool_error_and_keeps_the_edits_of_the_turn(tmp_path: Path) -> None:
    turns = [
        {"tool_calls": [{"name": "shell", "arguments": {"command": "ls"}}, _edit("start", "one")]},
        {"text": "added one"},
        *TURNS[2:],
    ]
    work, args = _setup(tmp_path, turns)
    _done_once(work, looprun(*args))
    [run_dir] = run_dirs(work)
    events = list(read_jsonl(run_dir / "journal.jsonl"))
    assert not [e for e in events if e["event"] == "policy_violation"]
    (unknown,) = [e for e in events if e["event"] == "tool_call" and e["tool"] == "shell"]
    assert unknown["is_error"] and "no tool named 'shell'" in unknown["result"]


# -- every write of a run: journal, state, checkpoint, tool, exchange, summary -----------

SWEEP = [
    "after:event:run_started",
    "after:event:plan",
    "after:state@1",
    "after:exchange@1",
    "torn:event:tool_call@1",
    "after:event:tool_call@1",
    "snapshot.index-lock@2",
    "torn:event:iteration@1",
    "after:event:iteration@1",
    "before:state@2",
    "torn:event:state@2",  # the state record half written: the step is redone
    "after:event:state@2",  # the record durable, state.json not yet replaced
    "after:state@2",
    "torn:exchange@3",
    "after:event:tool_call@2",
    "after:event:iteration@2",
    "torn:event:run_finished",
    "after:event:run_finished",
]


@pytest.mark.parametrize("point", SWEEP)
def test_a_kill_at_any_write_resumes_to_the_uninterrupted_result(
    tmp_path: Path, point: str
) -> None:
    work, args = _setup(tmp_path)
    _killed_at(point, args)
    row = _listed(work)
    assert row["resumable"], row  # killed before the end was written: resume finishes it
    summary = _done_once(work, _resume(work))
    [run_dir] = run_dirs(work)
    current = current_events(read_jsonl(run_dir / "journal.jsonl"))
    assert [e["iteration"] for e in current if e["event"] == "iteration"] == [1, 2]
    assert [e["event"] for e in current].count("run_finished") == 1
    assert json.loads((run_dir / "summary.json").read_text()) == summary
    assert not _listed(work)["resumable"]


# -- 2. a --commit run killed after it is done gets its commit exactly once -------------


def _git(work: Path, *args: str) -> str:
    out = subprocess.run(["git", *args], cwd=work, capture_output=True, text=True, check=True)
    return out.stdout.strip()


@pytest.mark.parametrize(
    "point",
    [
        "before:event:run_finished",  # the final state saved, nothing after it
        "before:summary",
        "commit.before",  # the intent saved, no commit yet
        "commit.made",  # HEAD moved, nothing recorded
        "commit.before-event",
        "after:event:commit",  # journaled, the state not told
    ],
)
def test_a_commit_run_killed_after_it_is_done_gets_its_commit_once(
    tmp_path: Path, point: str
) -> None:
    work, args = _setup(tmp_path)
    first = _git(work, "rev-parse", "HEAD")
    _killed_at(point, [*args, "--commit"])
    row = _listed(work)
    assert row["outcome"] == "done" and row["resumable"], row
    resumed = _resume(work)
    _done_once(work, resumed)
    assert _git(work, "rev-list", "--count", "HEAD") == "2"  # one commit, not two
    assert _git(work, "rev-parse", "HEAD^") == first
    assert _git(work, "show", "HEAD:log.txt") + "\n" == FINAL
    assert _git(work, "status", "--porcelain") == ""  # the index agrees with the commit
    [run_dir] = run_dirs(work)
    commits = [e for e in read_jsonl(run_dir / "journal.jsonl") if e["event"] == "commit"]
    assert [e["sha"] for e in commits] == [_git(work, "rev-parse", "HEAD")]
    assert json.loads((run_dir / "summary.json").read_text())["outcome"] == "done"
    row = _listed(work)
    assert (row["outcome"], row["resumable"], row["resume"]) == ("done", False, "")
    again = _resume(work)
    assert again.returncode == 2 and "nothing to resume" in again.stderr
    assert _git(work, "rev-list", "--count", "HEAD") == "2"


# -- 4. `looprun runs` and `resume` agree at both ends of a run ------------------------


def test_killed_before_the_first_state_save_is_listed_and_resumed_as_a_restart(
    tmp_path: Path,
) -> None:
    work, args = _setup(tmp_path)
    _killed_at("before:state@1", args)
    row = _listed(work)
    assert row["outcome"] == "interrupted" and row["resume"] == "start it again from the beginning"
    text = looprun("runs", "--workdir", str(work)).stdout
    assert "resume: start it again from the beginning" in text
    resumed = _resume(work)
    _done_once(work, resumed)
    assert "starting again" in resumed.stderr
    [run_dir] = run_dirs(work)
    current = current_events(read_jsonl(run_dir / "journal.jsonl"))
    assert [e["event"] for e in current].count("run_started") == 1


def test_killed_after_the_final_state_resume_writes_the_missing_summary(tmp_path: Path) -> None:
    work, args = _setup(tmp_path)
    _killed_at("before:summary", args)
    [run_dir] = run_dirs(work)
    assert not (run_dir / "summary.json").exists()
    row = _listed(work)
    assert (row["outcome"], row["resume"]) == ("done", "write the missing summary")
    resumed = _resume(work)
    summary = _done_once(work, resumed)
    assert json.loads((run_dir / "summary.json").read_text()) == summary
    events = [e["event"] for e in read_jsonl(run_dir / "journal.jsonl")]
    assert events.count("run_finished") == 1 and "iteration" in events
    row = _listed(work)
    assert (row["outcome"], row["resumable"]) == ("done", False)
    assert "nothing to resume" in looprun("runs", "--workdir", str(work)).stdout
    again = _resume(work)
    assert again.returncode == 2 and "already ended done" in again.stderr


# -- 5. the tokens and time of a killed iteration count after resume --------------------


def test_the_model_calls_of_a_killed_iteration_count_toward_usage(tmp_path: Path) -> None:
    work, args = _setup(tmp_path)
    _killed_at("after:exchange@3", args)  # iteration 2's first call paid, then killed
    [run_dir] = run_dirs(work)
    paid = [json.loads(line)["usage"] for line in (run_dir / "exchanges.jsonl").open()]
    assert len(paid) == 3
    resumed = _resume(work)
    summary = _done_once(work, resumed)
    every = [json.loads(line)["usage"] for line in (run_dir / "exchanges.jsonl").open()]
    assert len(every) == 5  # the killed call, then iteration 2 redone (two calls)
    usage = summary["usage"]
    assert usage["prompt_tokens"] == sum(u["prompt_tokens"] for u in every)
    assert usage["completion_tokens"] == sum(u["completion_tokens"] for u in every)
    (mark,) = [e for e in read_jsonl(run_dir / "journal.jsonl") if e["event"] == "resumed"]
    assert mark["recovered"]["prompt_tokens"] == paid[2]["prompt_tokens"] > 0
    assert 0 < mark["recovered"]["seconds"] <= summary["duration_s"]
    state = json.loads((run_dir / "state.json").read_text())
    assert state["exchanges"] == 5


# -- 8. smaller: warnings and reasons on one line ---------------------------------------


def test_a_missing_price_is_warned_of_for_the_role_the_run_uses_only(tmp_path: Path) -> None:
    work, args = _setup(tmp_path)
    i = args.index("--model")
    args[i + 1] = "openai:unpriced-local-model"
    with FakeProvider() as server:
        server.push(
            openai_reply(tool_calls=[("edit_file", TURNS[0]["tool_calls"][0]["arguments"])]),
            openai_reply("added one"),
            openai_reply(tool_calls=[("edit_file", TURNS[2]["tool_calls"][0]["arguments"])]),
            openai_reply("added two"),
        )
        proc = looprun(
            *args, "--base-url", server.openai_url, env={"OPENAI_API_KEY": "sk-test-0000"}
        )
    _done_once(work, proc)
    warnings = [ln for ln in proc.stderr.splitlines() if ln.startswith("warning: no price")]
    assert len(warnings) == 1 and "(act role)" in warnings[0], proc.stderr


def test_a_multi_line_git_failure_is_one_line_in_the_verdict_and_the_runs_row(
    tmp_path: Path,
) -> None:
    work, args = _setup(tmp_path)
    (work / ".looprun").mkdir()
    (work / ".looprun" / "snapshot.index").write_bytes(b"\0" * 64)  # git: two lines
    proc = looprun(*args)
    assert proc.returncode == 1, proc.stderr
    (verdict,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("→ error")]
    assert "index file corrupt" in verdict and "; " in verdict
    assert not [ln for ln in proc.stderr.splitlines() if ln.startswith(("fatal:", "hint:"))]
    assert "\n" not in _summary(proc)["reason"]
    rows = looprun("runs", "--workdir", str(work)).stdout.splitlines()
    assert len(rows) == 2 and "index file corrupt" in rows[1], rows  # a header, one row
