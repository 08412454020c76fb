"""`--commit`: a message with the intent and the run id, the repository's hooks (unless
`--no-verify`), and a clear refusal on a detached HEAD. Real repositories, real hooks."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from tests.report.runs import make_project
from tests.support.cli import looprun

from looprun.workspace.commit import CommitRefused, commit_paths

INTENT = "add() subtracts instead of adding\n\nSeen in the invoice totals since v2; keep the API."


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout


def _hook(repo: Path, name: str, body: str) -> None:
    path = repo / ".git" / "hooks" / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def _run(tmp: Path, *extra: str, intent: str = INTENT) -> tuple[Path, subprocess.CompletedProcess]:
    repo, template, script = make_project(tmp)
    return repo, looprun(
        str(template), "--intent", intent, "--model", f"script:{script}", "--json", *extra,
        cwd=repo,
    )  # fmt: skip


def test_commit_message_names_the_intent_and_the_run_and_hooks_run(tmp_path: Path) -> None:
    repo, template, script = make_project(tmp_path)
    seen = tmp_path / "hooks-ran.txt"
    _hook(repo, "pre-commit", f"echo pre-commit >> {seen}\n")
    # a commit-msg hook that insists on the trailer, as a team's policy might
    _hook(repo, "commit-msg", f'grep -q "^Looprun-Run: " "$1" && echo commit-msg >> {seen}\n')
    proc = looprun(
        str(template), "--intent", INTENT, "--model", f"script:{script}", "--json", "--commit",
        cwd=repo,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    run_id = json.loads(proc.stdout)["run_id"]
    message = _git(repo, "log", "-1", "--format=%B")
    subject, blank, *_ = message.splitlines()
    assert subject == "looprun mini: add() subtracts instead of adding" and blank == ""
    assert "Seen in the invoice totals since v2; keep the API." in message
    assert "Done after 2 iteration(s): exit conditions hold." in message
    trailers = _git(repo, "log", "-1", "--format=%(trailers:only,unfold)").split("\n")
    assert f"Looprun-Run: {run_id}" in trailers and "Looprun-Template: mini" in trailers
    assert seen.read_text().split() == ["pre-commit", "commit-msg"]
    assert _git(repo, "show", "--name-only", "--format=", "HEAD").split() == ["src/calc.py"]


def test_a_failing_hook_refuses_the_commit_and_no_verify_skips_it(tmp_path: Path) -> None:
    repo, template, script = make_project(tmp_path)
    _hook(repo, "pre-commit", "echo 'lint: trailing whitespace in src/calc.py' >&2\nexit 1\n")
    head = _git(repo, "rev-parse", "HEAD")
    args = [str(template), "--intent", INTENT, "--model", f"script:{script}", "--commit"]
    refused = looprun(*args, "--json", cwd=repo)
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["outcome"] == "done"  # the run itself succeeded
    assert "the commit was refused (a hook failed" in refused.stderr
    assert "lint: trailing whitespace in src/calc.py" in refused.stderr
    assert _git(repo, "rev-parse", "HEAD") == head  # nothing committed
    assert "return a + b" in (repo / "src" / "calc.py").read_text()  # the work stays
    # the same run again from the start, with the hooks skipped
    _git(repo, "checkout", "-q", "--", "src/calc.py")
    # restored from the user's index, as the refused commit left it: HEAD's entry
    assert "return a - b" in (repo / "src" / "calc.py").read_text()
    assert _git(repo, "status", "--porcelain") == ""
    skipped = looprun(*args, "--no-verify", "--json", cwd=repo)
    assert skipped.returncode == 0, skipped.stderr
    assert "committed" in skipped.stderr, skipped.stderr
    assert _git(repo, "rev-parse", "HEAD^").strip() == head.strip()
    assert _git(repo, "log", "-1", "--format=%s").startswith("looprun mini: add()")


def test_a_refused_commit_leaves_a_same_second_edit_showing_as_changed(tmp_path: Path) -> None:
    """The user's index is put back with its own time: an entry git could trust only by
    reading the file (the file changed in the second the index was written, same size)
    stays that way, so `git status` still shows the run's change after the refusal."""
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    code = repo / "src" / "calc.py"
    code.write_text("def add(a, b):\n    return a - b\n")
    for args in (["init", "-q", "-b", "main"], ["config", "core.trustctime", "false"]):
        _git(repo, *args)
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "calc")
    _hook(repo, "pre-commit", "exit 1\n")
    was = code.stat()
    # what a quick run does: the file rewritten in place within the second git recorded
    os.utime(repo / ".git" / "index", ns=(was.st_atime_ns, was.st_mtime_ns))
    with code.open("r+") as fh:
        fh.write("def add(a, b):\n    return a + b\n")
    os.utime(code, ns=(was.st_atime_ns, was.st_mtime_ns))
    assert _git(repo, "diff-files", "--name-only").split() == ["src/calc.py"]

    with pytest.raises(CommitRefused, match="a hook failed"):
        commit_paths(repo, "add() adds", ["src/calc.py"], verify=True)

    assert _git(repo, "diff-files", "--name-only").split() == ["src/calc.py"]
    assert _git(repo, "status", "--porcelain") == " M src/calc.py\n"


def test_detached_head_is_refused_before_the_run(tmp_path: Path) -> None:
    repo, template, script = make_project(tmp_path)
    _git(repo, "checkout", "-q", "--detach")
    at = _git(repo, "rev-parse", "--short", "HEAD").strip()
    proc = looprun(
        str(template), "--intent", INTENT, "--model", f"script:{script}", "--commit", cwd=repo
    )
    assert proc.returncode == 2
    assert f"--commit: HEAD is detached (at {at})" in proc.stderr
    assert "Check out a branch first" in proc.stderr and "Traceback" not in proc.stderr
    assert not (repo / ".looprun" / "runs").exists()  # no token spent, no run started
