"""Sub-loops whose sub-template acts through an agent CLI (the stand-in CLI on PATH): the
outer loop runs them on its executor, in worktrees or in its own tree, and sees what their
CLI turns did and spent - in its facts, its journal, its summary and its report - and its
budget counts that spending."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.cli import cli_env, looprun
from tests.support.fake_agent_cli import install
from tests.support.git_repos import git_repo

INNER = """\
looprun: 1
name: agent-edit
inputs:
  intent: {type: string, required: true}
plan: {mode: none}
act:
  prompt: "{{ intent }}"
  agent: {cli: claude-code, timeout: 1m}
observe:
  diff: {parser: git_diff}
exit: ["diff.lines > 0"]
refine:
  - else: {retry: "change a file"}
limits: {max_iterations: 2}
"""

# exit holds only if the outer loop sees the sub-loops' agent facts
OUTER = """\
looprun: 1
name: agent-pair
inputs:
  intent: {type: string, required: true}
plan:
  mode: static
  tasks:
    - {id: left, goal: "left"}
    - {id: right, goal: "right"}
each_task:
  uses: ./agent-edit.yaml
  with: {intent: "{{ task.goal }}"}
  isolation: ISOLATION
  parallel: PARALLEL
exit:
  - "subloops.all_done"
  - "subloops.agent.calls == 2 and subloops.agent.tool_calls == 2"
  - "subloops.list[0].agent.cli == 'claude-code'"
refine:
  - if: subloops.failed
    then: {escalate: "{{ subloops.failed }} sub-loop(s) did not finish"}
  - else: {escalate: "agent facts not seen: {{ subloops.agent }}"}
limits: {max_iterations: 1}
"""


def _setup(tmp_path: Path, isolation: str, parallel: int, limits: str = "") -> tuple[Path, Path]:
    work = tmp_path / "proj"
    work.mkdir()
    (work / "README.md").write_text("a project\n")
    git_repo(work)
    tpl = tmp_path / "tpl"
    tpl.mkdir()
    (tpl / "agent-edit.yaml").write_text(INNER)
    outer = OUTER.replace("ISOLATION", isolation).replace("PARALLEL", str(parallel))
    if limits:
        outer = outer.replace("limits: {max_iterations: 1}", f"limits: {limits}")
    (tpl / "agent-pair.yaml").write_text(outer)
    return work, tpl / "agent-pair.yaml"


def _env(tmp_path: Path, mode: str) -> tuple[dict[str, str], Path]:
    """The stand-in CLI on PATH as ``claude``, and the log of its starts."""
    bindir = tmp_path / "bin"
    install(bindir, "claude")
    log = tmp_path / "cli.jsonl"
    path = (str(bindir), str(Path(sys.executable).parent), os.environ["PATH"])
    env = {
        "PATH": os.pathsep.join(path),
        "FAKE_AGENT_MODE": mode,
        "FAKE_AGENT_LOG": str(log),
        "ANTHROPIC_API_KEY": "sk-ant-fake-key-for-subloops",
        "XDG_CONFIG_HOME": str(tmp_path / "no-config"),  # no model named anywhere
        # no OS sandbox: the stand-in logs its starts outside the tree, which a sandboxed
        # CLI cannot write to (tests/agents/test_agent_sandbox.py is about that)
        "LOOPRUN_SANDBOX_BACKENDS": "",
    }
    return env, log


def _run(tmp_path: Path, work: Path, outer: Path, mode: str) -> tuple[dict, list, list, str]:
    env, log = _env(tmp_path, mode)
    proc = looprun(str(outer), "--intent", "go", "--json", cwd=work, env=env)
    summary = json.loads(proc.stdout)
    run = Path(summary["run_dir"])
    events = [json.loads(x) for x in (run / "journal.jsonl").read_text().splitlines()]
    starts = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    return summary, events, starts, proc.stderr


def test_agent_subloops_in_worktrees_report_their_facts_and_usage_to_the_outer_loop(
    tmp_path: Path,
) -> None:
    work, outer = _setup(tmp_path, "worktree", 2)
    summary, events, starts, err = _run(tmp_path, work, outer, "write:{prompt}.txt=x|usage:300/50")
    # done needs the exit conditions on subloops.agent: the outer loop saw the CLI turns
    assert summary["outcome"] == "done", err
    assert "(no model: its sub-loops run agent CLIs)" in err
    assert (work / "left.txt").read_text() == "x" and (work / "right.txt").read_text() == "x"
    # each CLI turn ran in its sub-loop's worktree, its home under the sub-loop's run
    run = Path(summary["run_dir"])
    assert sorted(Path(s["cwd"]).name for s in starts) == ["left-1", "right-1"]
    for s in starts:
        assert Path(s["cwd"]).parent == run / "worktrees"
        assert Path(s["home"]) == run / "subloops" / Path(s["cwd"]).name / "agent-home"
    # usage: each sub-loop's agent tokens, charged to the outer run
    assert summary["usage"]["prompt_tokens"] == 600
    assert summary["usage"]["completion_tokens"] == 100
    for rec in summary["subloops"]:
        assert rec["agent"]["cli"] == "claude-code"
        assert (rec["agent"]["calls"], rec["agent"]["tool_calls"]) == (1, 1)
        assert rec["agent"]["tokens"] == 350 and rec["tokens"] == 350
    # the outer journal records each sub-loop's result with its agent totals
    finished = {e["task"]: e for e in events if e["event"] == "subloop_finished"}
    assert set(finished) == {"left", "right"}
    assert all(e["agent"]["tokens"] == 350 and e["outcome"] == "done" for e in finished.values())
    # the report shows the CLI's tool calls inside each sub-loop's section
    report = looprun("report", summary["run_id"], cwd=work)
    assert report.returncode == 0, report.stderr
    sections = report.stdout.split('<a id="run-')[1:]
    # the report escapes ':' outside code spans, so no text of a run becomes an autolink
    assert len(sections) == 2 and all("claude-code\\:Write×1" in s for s in sections)


def test_an_agent_subloop_in_the_outer_tree_is_held_to_the_outer_budget(tmp_path: Path) -> None:
    limits = "{max_iterations: 1, max_tokens: 5000}"
    work, outer = _setup(tmp_path, "none", 1, limits)
    # the CLI changes nothing and spends 5,500 tokens: more than the outer budget's share
    summary, events, starts, err = _run(tmp_path, work, outer, "usage:4000/1500")
    assert summary["outcome"] == "exhausted", err
    assert summary["code"] == "max_tokens"
    (first,) = [e for e in events if e["event"] == "subloop_finished"]
    # the sub-loop stops before a second CLI turn, on its share of the outer budget ...
    assert first["task"] == "left" and first["outcome"] == "exhausted"
    assert first["code"] == "outer.max_tokens", first
    assert first["agent"]["calls"] == 1 and first["agent"]["tokens"] == 5500
    assert [Path(s["cwd"]) for s in starts] == [work]  # isolation none: the outer tree
    # ... and what it spent is the outer run's: the second sub-loop never starts
    assert summary["usage"]["prompt_tokens"] + summary["usage"]["completion_tokens"] == 5500
    by_id = {r["id"]: r for r in summary["subloops"]}
    assert by_id["left"]["agent"]["tokens"] == 5500
    assert by_id["right"]["outcome"] == "pending" and "agent" not in by_id["right"]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][:1]
    except OSError:
        return False
    return state != "Z"


def test_ctrl_c_kills_a_subloops_cli_turn_and_resume_finishes_it(tmp_path: Path) -> None:
    work, outer = _setup(tmp_path, "worktree", 1)
    env, log = _env(tmp_path, "hang")
    proc = subprocess.Popen(
        [sys.executable, "-m", "looprun", str(outer), "--intent", "go"],
        cwd=work,
        env=cli_env(env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not (log.exists() and '"child"' in log.read_text()):  # the CLI hangs in its turn
        assert time.monotonic() < deadline and proc.poll() is None, "the CLI never started"
        time.sleep(0.05)
    (start, child) = [json.loads(x) for x in log.read_text().splitlines()]
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C at a terminal does
    t0 = time.monotonic()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert time.monotonic() - t0 < 15, "the interrupt waited for the CLI's turn"
    # the CLI runs in a session of its own, out of the terminal's reach: looprun killed it
    assert not _alive(start["pid"]) and not _alive(child["child"])
    (run,) = (work / ".looprun" / "runs").iterdir()
    sub = [json.loads(x) for x in (run / "subloops" / "left-1" / "journal.jsonl").open()]
    assert sub[-1]["event"] == "interrupted"  # the killed turn is not taken as a finding
    assert not any(e["event"] in ("agent_turn", "iteration") for e in sub)

    env["FAKE_AGENT_MODE"] = "write:{prompt}.txt=x"
    res = looprun("resume", run.name, "--json", cwd=work, env=env)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["outcome"] == "done"
    assert (work / "left.txt").read_text() == "x" and (work / "right.txt").read_text() == "x"
