"""Ctrl-C (SIGINT) of the outer process while sub-loops run: they stop promptly, their
checks die with them, every journal stays consistent, and resume finishes the tree."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import yaml
from subloop_templates import INNER as EDIT_INNER
from subloop_templates import OUTER, edit_turns
from tests.support.cli import looprun, scripted_run, start_looprun
from tests.support.git_repos import git_repo

NAP = "31.5"  # a check that would hold the interrupt for half a minute

# The conflict tests' edit template with one more check, which sleeps while NAPFILE exists.
SLOW_CHECK = (
    '  slow: {run: "test ! -f slow.txt || test ! -f NAPFILE || sleep NAP", parser: exit_code}\n'
)
DIFF_CHECK = "  diff: {parser: git_diff}\n"
assert DIFF_CHECK in EDIT_INNER  # else the slow check would silently go missing
INNER = EDIT_INNER.replace(DIFF_CHECK, DIFF_CHECK + SLOW_CHECK)


def _sleepers() -> list[str]:
    """Processes still running the slow check, anywhere on this machine."""
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                state = (p / "stat").read_text().split(") ")[-1][:1]
            except OSError:
                continue
            if f"sleep {NAP}" in cmd and state != "Z":
                out.append(f"{p.name}: {cmd}")
    return out


def _events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]  # every line whole


def _finished(run_dir: Path, task: str) -> bool:
    try:
        records = json.loads((run_dir / "subloops.json").read_text())["records"]
    except (OSError, ValueError, KeyError):
        return False  # not written yet, or being replaced
    return records.get(task, {}).get("outcome") == "done"


def test_sigint_stops_subloops_promptly_and_resume_finishes(tmp_path: Path) -> None:
    work = tmp_path / "proj"
    work.mkdir()
    (work / "greeting.txt").write_text("hello\n")
    git_repo(work)
    nap = tmp_path / "nap"
    nap.write_text("")
    tpl = tmp_path / "tpl"
    tpl.mkdir()
    (tpl / "edit.yaml").write_text(INNER.replace("NAPFILE", str(nap)).replace("NAP", NAP))
    (tpl / "pair.yaml").write_text(OUTER)
    script = tmp_path / "script.yaml"
    script.write_text(
        yaml.safe_dump(
            {
                "tasks": {
                    "left": edit_turns("greeting.txt", "hello from the left\n"),
                    "right": edit_turns("slow.txt", "slow\n", delay_s=0.5),
                }
            }
        )
    )
    proc = start_looprun(
        *scripted_run(str(tpl / "pair.yaml"), intent="greet", workdir=work, script=script),
        cwd=work,
        text=True,
    )
    runs = work / ".looprun" / "runs"
    right_journal: Path | None = None
    deadline = time.monotonic() + 60
    # wait until the right sub-loop is in its check and the left one has finished: the
    # interrupt must leave a finished sub-loop done and stop the running one
    while time.monotonic() < deadline:
        found = list(runs.glob("*/subloops/right-1/journal.jsonl")) if runs.exists() else []
        if found and _sleepers() and _finished(found[0].parents[2], "left"):
            right_journal = found[0]
            break
        time.sleep(0.05)
    else:
        proc.kill()
        raise AssertionError("the slow check never started")
    run_dir = right_journal.parents[2]
    records = json.loads((run_dir / "subloops.json").read_text())["records"]
    assert records["right"]["outcome"] == "running"

    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C at a terminal does
    t0 = time.monotonic()
    _, err = proc.communicate(timeout=60)
    took = time.monotonic() - t0
    assert proc.returncode == 130, err
    assert took < 10, f"the interrupt waited {took:.1f}s for the sub-loops"
    assert "interrupted" in err
    assert not _sleepers(), "the sub-loop's check outlived the interrupt"

    # every journal consistent: whole lines; the interrupted one says so and did not
    # record a finding from the killed check, nor an outcome
    right = _events(right_journal)
    assert right[-1]["event"] == "interrupted"
    assert not any(e["event"] in ("iteration", "run_finished") for e in right)
    records = json.loads((run_dir / "subloops.json").read_text())["records"]
    assert records["right"]["outcome"] == "running"
    left_journal = run_dir / "subloops" / "left-1" / "journal.jsonl"
    left_before = left_journal.read_text()
    assert records["left"]["outcome"] == "done"
    assert _events(left_journal)[-1]["event"] == "run_finished"
    listed = looprun("runs", "--workdir", str(work), cwd=work)
    assert "interrupted" in listed.stdout

    nap.unlink()
    res = looprun("resume", run_dir.name, "--workdir", str(work), "--json", cwd=work)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["outcome"] == "done"
    assert left_journal.read_text() == left_before  # the finished sub-loop did not run again
    assert (work / "greeting.txt").read_text() == "hello from the left\n"
    assert (work / "slow.txt").read_text() == "slow\n"
    assert sorted(p.name for p in (run_dir / "subloops").iterdir()) == ["left-1", "right-1"]
