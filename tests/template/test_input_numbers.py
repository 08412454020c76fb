"""Numbers that name an input (`max_diff_lines: "{{ inputs.max_diff_lines }}"`): set once,
checked when the template loads (type, bounds, located errors), overridable with --set."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

TEMPLATE = """\
looprun: 1
name: numbers
inputs:
  max_diff_lines: {type: integer, default: 120}
  iterations: {type: integer, default: 4}
  budget: {type: number, default: 0.5}
  wall: {type: string, default: 10m}
observe:
  check: {parser: exit_code, run: "python -c 'import sys; sys.exit(1)'"}
  diff: {parser: git_diff}
act:
  prompt: "{{ task.goal }}"
  constraints:
    max_diff_lines: "{{ inputs.max_diff_lines }}"
exit: [check.ok, "diff.lines <= inputs.max_diff_lines"]
limits:
  max_iterations: "{{ inputs.iterations }}"
  max_cost_usd: "{{ inputs.budget }}"
  timeout: "{{ inputs.wall }}"
  per_tool: {run: "{{ inputs.iterations }}"}
"""


def looprun(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "looprun", *args], capture_output=True, text=True, cwd=cwd
    )


def test_numbers_take_the_inputs_values(tmp_path: Path) -> None:
    (tmp_path / "numbers.yaml").write_text(TEMPLATE, encoding="utf-8")
    proc = looprun("explain", "numbers.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "max diff lines: 120" in proc.stdout
    limits = "limits: max_iterations 4, timeout 10m, max_cost_usd 0.5, max_repeats 3, run calls 4"
    assert limits in proc.stdout


def test_a_bad_reference_is_a_located_error(tmp_path: Path) -> None:
    bad = (
        TEMPLATE.replace("{type: integer, default: 120}", "{type: integer, default: 0}")
        .replace('"{{ inputs.iterations }}"\n', '"{{ inputs.iteration }}"\n', 1)
        .replace('"{{ inputs.budget }}"', '"{{ inputs.wall }}"')
        .replace("{type: string, default: 10m}", "{type: string}")
    )
    (tmp_path / "numbers.yaml").write_text(bad, encoding="utf-8")
    proc = looprun("validate", "numbers.yaml", cwd=tmp_path)
    assert proc.returncode == 2
    out = proc.stdout
    assert (
        "numbers.yaml:14:21: act.constraints.max_diff_lines: input 'max_diff_lines' "
        "(its default 0): expected an integer ≥ 1, got 0"
    ) in out
    assert (
        "numbers.yaml:17:19: limits.max_iterations: no input named 'iteration' "
        "(did you mean 'iterations'?)"
    ) in out
    assert (
        "numbers.yaml:18:17: limits.max_cost_usd: input 'wall' is of type string; "
        "this value needs integer or number"
    ) in out
    assert "numbers.yaml:19:12: limits.timeout: input 'wall' has no default" in out
    assert "Traceback" not in out + proc.stderr


def test_set_changes_every_use_and_is_checked_the_same_way(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "numbers.yaml").write_text(TEMPLATE, encoding="utf-8")
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *cmd], cwd=repo, check=True
        )
    script = tmp_path / "script.yaml"
    script.write_text(
        textwrap.dedent(
            """\
            - text: "nothing to change"
            - text: "nothing to change"
            - text: "nothing to change"
            """
        ),
        encoding="utf-8",
    )
    common = ("numbers.yaml", "--intent", "x", "--model", f"script:{script}", "--json")
    proc = looprun(*common, "--set", "iterations=2", cwd=repo)
    summary = json.loads(proc.stdout)
    assert summary["outcome"] == "exhausted" and summary["code"] == "max_iterations", summary
    assert summary["iterations"] == 2
    bad = looprun(*common, "--set", "max_diff_lines=0", cwd=repo)
    assert bad.returncode == 2
    assert (
        "numbers.yaml:14:21: act.constraints.max_diff_lines: input 'max_diff_lines' "
        "(--set 0): expected an integer ≥ 1, got 0"
    ) in bad.stderr
