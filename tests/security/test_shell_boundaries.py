"""User input, task goals and model text stay data on their way into shell commands.

Each test runs the real CLI on a real repository with inputs that would run
``touch PWNED`` if any of them were ever treated as shell code or as a template.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.cli import looprun
from tests.support.git_repos import git_repo

QUIET_MODEL = "- text: nothing to do\n"

DIRECT = """\
looprun: 1
name: direct
inputs:
  intent: {type: string, required: true}
  k: {type: string, default: "a"}
plan: {mode: none}
act:
  prompt: "{{ intent }}"
  tools: [write_file]
  max_steps: 2
observe:
  probe: {parser: exit_code, run: "echo {{ intent }} {{ inputs.k }} > out.txt"}
exit: ["probe.ok"]
refine:
  - else: {escalate: "no"}
limits: {max_iterations: 1}
"""

INNER = """\
looprun: 1
name: inner
inputs:
  intent: {type: string, required: true}
  check: {type: command, default: "true"}
plan: {mode: none}
act:
  prompt: "{{ intent }}"
  tools: [write_file]
  max_steps: 2
observe:
  probe: {parser: exit_code, run: "{{ inputs.check }} > probe.txt"}
exit: ["probe.ok"]
refine:
  - else: {escalate: "no"}
limits: {max_iterations: 1}
"""

OUTER = """\
looprun: 1
name: outer
inputs:
  intent: {type: string, required: true}
  check: {type: command, default: "echo"}
plan:
  mode: static
  tasks:
    - {id: one, goal: "Fix: {{ intent }}"}
each_task:
  uses: ./inner.yaml
  with: {intent: "{{ task.goal }}", check: "{{ inputs.check }} {{ task.goal }}"}
exit: ["subloops.all_done"]
refine:
  - if: subloops.failed
    then: {escalate: "failed"}
  - else: {escalate: "unexpected"}
limits: {max_iterations: 1}
"""

HOSTILE = "x; touch PWNED {{ 7*7 }} $(touch PWNED) `touch PWNED`"


def _setup(tmp_path: Path, **files: str) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / "f.txt").write_text("hello\n")
    git_repo(work)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return work


def _pwned(root: Path) -> list[str]:
    return [str(p) for p in root.rglob("PWNED*")]


def test_intent_and_set_values_are_quoted_in_observer_commands(tmp_path: Path) -> None:
    work = _setup(tmp_path, **{"direct.yaml": DIRECT, "model.yaml": QUIET_MODEL})
    proc = looprun(
        str(tmp_path / "direct.yaml"),
        "--intent",
        HOSTILE,
        "--set",
        "k=$(touch PWNED2);'\"",
        "--model",
        f"script:{tmp_path / 'model.yaml'}",
        cwd=work,
    )
    assert proc.returncode == 0, proc.stderr
    assert _pwned(tmp_path) == []
    # The values arrive verbatim: not run, not rendered as templates.
    assert (work / "out.txt").read_text() == HOSTILE + " $(touch PWNED2);'\"\n"


def test_substitution_inside_shell_quotes_is_refused_at_load_time(tmp_path: Path) -> None:
    quoted = DIRECT.replace("echo {{ intent }} {{ inputs.k }}", 'echo \\"k={{ inputs.k }}\\"')
    work = _setup(tmp_path, **{"direct.yaml": quoted, "model.yaml": QUIET_MODEL})
    proc = looprun("validate", str(tmp_path / "direct.yaml"), cwd=work)
    assert proc.returncode != 0
    said = proc.stdout + proc.stderr
    assert "direct.yaml:12:" in said
    assert "inside shell quotes" in said
    run = looprun(
        str(tmp_path / "direct.yaml"),
        "--intent",
        "x",
        "--set",
        "k=$(touch PWNED)",
        "--model",
        f"script:{tmp_path / 'model.yaml'}",
        cwd=work,
    )
    assert run.returncode != 0
    assert _pwned(tmp_path) == []


def test_task_goal_mapped_into_a_command_input_of_a_subloop_stays_data(tmp_path: Path) -> None:
    work = _setup(tmp_path, **{"outer.yaml": OUTER, "inner.yaml": INNER, "model.yaml": QUIET_MODEL})
    proc = looprun(
        str(tmp_path / "outer.yaml"),
        "--intent",
        HOSTILE,
        "--model",
        f"script:{tmp_path / 'model.yaml'}",
        cwd=work,
    )
    assert proc.returncode == 0, proc.stderr
    assert _pwned(tmp_path) == []
    # The outer command input stayed code (echo ran); the goal was one quoted value.
    assert (work / "probe.txt").read_text() == f"Fix: {HOSTILE}\n"
