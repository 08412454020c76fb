"""How many git processes an iteration costs, counted by a real ``git`` wrapper on PATH
(it logs each call and runs the real git) around the real CLI on a real repository.

An iteration whose tools only read and whose observer runs no command costs no git call
at all; nor does one whose file tool writes a file: its snapshot, checkpoint commit and
ref are written in-process, its diff served by a long-lived git process started once
per run. Counted as the difference between a longer and a shorter run of
the same script, so start-up and the final summary do not count.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import git_init, looprun

TEMPLATE = """\
looprun: 1
name: steps
inputs:
  intent: {type: string, required: true}
plan: {mode: none}
act:
  prompt: "{{ intent }}"
  tools: [read_file, write_file]
  constraints:
    paths: {allow: ["**"]}
observe:
  status:
    parser: json
    file: status.json
    options: {facts: {done: done}, ok: done}
exit: [status.ok]
refine:
  - else: {retry: "not yet"}
limits: {max_repeats: false}  # the read-only iterations repeat on purpose
"""


def read(n: int) -> dict[str, Any]:
    return {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]}


def write(n: int) -> dict[str, Any]:
    call = {"name": "write_file", "arguments": {"path": f"notes/n{n}.txt", "content": f"{n}\n"}}
    return {"tool_calls": [call]}


def git_calls(
    tmp: Path, name: str, step: Any, iterations: int, template: str = TEMPLATE
) -> list[str]:
    """The git command lines one CLI run of ``iterations`` iterations made."""
    root = tmp / f"{name}-{iterations}"
    repo = root / "repo"
    repo.mkdir(parents=True)
    (repo / "status.json").write_text('{"done": false}\n')
    (repo / "a.txt").write_text("hello\n")
    git_init(repo)
    (root / "steps.yaml").write_text(template)
    turns = [t for n in range(iterations) for t in (step(n), {"text": "that is all"})]
    (root / "script.json").write_text(json.dumps(turns))
    shim = root / "bin"
    shim.mkdir()
    log = root / "git.log"
    real = shutil.which("git")
    assert real is not None
    (shim / "git").write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "{real}" "$@"\n')
    (shim / "git").chmod(0o755)
    path = os.pathsep.join([str(shim), str(Path(sys.executable).parent), os.environ["PATH"]])
    proc = looprun(
        str(root / "steps.yaml"),
        *("--intent", "keep notes", "--workdir", str(repo)),
        *("--model", f"script:{root / 'script.json'}", "--max-iterations", str(iterations)),
        "--json",
        env={"PATH": path},
    )
    assert proc.returncode == 3, proc.stderr  # exhausted: the status never says done
    assert json.loads(proc.stdout)["iterations"] == iterations
    return log.read_text().splitlines()


def subcommand(line: str) -> str:
    words = iter(line.split())
    for word in words:
        if word == "-c":
            next(words)
        elif not word.startswith("-"):
            return word
    return ""


def test_an_iteration_that_wrote_nothing_costs_no_git_call(tmp_path: Path) -> None:
    short = git_calls(tmp_path, "read", read, 2)
    long = git_calls(tmp_path, "read", read, 5)
    assert short, "the wrapper saw no git call at all"
    assert len(long) == len(short), sorted(set(long) - set(short))


def test_an_iteration_that_wrote_a_file_starts_no_git_process(tmp_path: Path) -> None:
    # The written file is hashed and the snapshot's trees, checkpoint commit and ref
    # stored in-process; the diff goes through one long-lived `git diff-tree --stdin`,
    # started once per run and asked only for what changed since the last iteration; the
    # objects that diff reads were stored in-process, so they are hashed again, not listed
    # through a second git process.
    short = git_calls(tmp_path, "write", write, 2)
    long = git_calls(tmp_path, "write", write, 5)
    assert len(long) == len(short), long[len(short) :]
    for run in (short, long):
        served = [subcommand(line) for line in run if "--stdin" in line.split()]
        assert served.count("diff-tree") == 1, run
        assert not any("looprun checkpoint" in line for line in run), run


def test_a_run_starts_with_what_the_in_process_snapshot_cannot_answer(tmp_path: Path) -> None:
    """Start-up asks git only what it must, once: the repository is found in one call and
    never asked again whether it is one, HEAD is asked once, the ignore files are read
    once, and object ids and git paths are worked out here, not asked."""
    run = git_calls(tmp_path, "start", write, 1)
    lines = [" ".join(w for w in line.split() if "=" not in w) for line in run]
    assert sum("--show-toplevel" in line for line in lines) == 1, run
    assert not [line for line in lines if "--is-inside-work-tree" in line], run
    assert sum("HEAD^{commit}" in line for line in lines) == 1, run
    assert sum(":(glob)**/.gitignore" in line for line in lines) == 1, run
    assert [subcommand(line) for line in run].count("config") == 1, run  # one read of it all
    # the invocation is sealed in-process: its blob and ref as git writes them
    assert not [line for line in run if subcommand(line) in ("hash-object", "update-ref")], run
    assert not [line for line in lines if "--git-path" in line or "^{tree}" in line], run
    assert len(run) <= 14, "\n".join(run)


@pytest.mark.e2e  # four whole runs
def test_a_check_that_did_not_apply_costs_no_git_call(tmp_path: Path) -> None:
    """An observer with a command whose ``when`` is false started nothing, so the tree
    is not looked at again after it: reading iterations still cost no git call."""
    skipped = TEMPLATE.replace(
        "exit: [status.ok]",
        '  lint:\n    when: "false"\n    run: "true"\n    parser: exit_code\nexit: [status.ok]',
    )
    short = git_calls(tmp_path, "skip", read, 2, skipped)
    long = git_calls(tmp_path, "skip", read, 5, skipped)
    assert len(long) == len(short), sorted(set(long) - set(short))
