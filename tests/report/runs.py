"""Real runs to report on: a repository with one bug, a template whose refine tree has
named rules, and a scripted model that first makes a wrong fix (so a test fails with an
assertion message that carries HTML and a script), then the right one."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import looprun
from tests.support.git_repos import git_repo

TEMPLATE = """\
looprun: 1
name: mini
inputs:
  intent: {type: string, required: true}
plan: {mode: none}
act:
  prompt: "{{ intent }}"
  tools: [read_file, write_file, edit_file]
  constraints:
    paths: {allow: ["src/**", "tests/**"]}
observe:
  tests:
    run: "python -m pytest -q -p no:cacheprovider --junitxml={{ run.artifacts }}/junit.xml"
    parser: junit
    file: "{{ run.artifacts }}/junit.xml"
    timeout: 60s
  diff: {parser: git_diff}
exit: [tests.ok]
refine:
  - if: progress.repeats >= 3
    then: {escalate: "no progress"}
  - if: tests.failed > 0
    then: {retry: "{{ tests.feedback }}"}
  - else: {retry: "try again"}
limits: {max_iterations: 4, max_repeats: 10, max_tokens: 100000}
"""

# The assertion message is what a hostile (or unlucky) test prints: markup and a script.
HOSTILE = '<script>window.__pwned = 1; console.error("pwned")</script><img src=x onerror=alert(1)>'

TEST = f"""\
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "src"))
from calc import add  # noqa: E402


def test_add():
    assert add(2, 3) == 5, {HOSTILE!r}
"""

SCRIPT = """\
- tool_calls:
    - name: edit_file
      arguments: {path: src/calc.py, old: "a - b", new: "a * b"}
- text: "Fixed."
- tool_calls:
    - name: read_file
      arguments: {path: src/calc.py}
    - name: edit_file
      arguments: {path: src/calc.py, old: "a * b", new: "a + b"}
- text: "Fixed now."
"""


def make_project(tmp: Path) -> tuple[Path, Path, Path]:
    repo = tmp / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "src" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "tests" / "test_calc.py").write_text(TEST)
    git_repo(repo)
    template = tmp / "mini.yaml"
    template.write_text(TEMPLATE)
    script = tmp / "script.yaml"
    script.write_text(SCRIPT)
    return repo, template, script


def real_run(tmp: Path, *extra: str, env: dict[str, str] | None = None) -> tuple[Path, str, str]:
    """Run the template to ``done`` in two iterations; returns (repo, run id, stderr)."""
    repo, template, script = make_project(tmp)
    proc = looprun(
        str(template), "--intent", "add() subtracts", "--model", f"script:{script}",
        "--json", *extra, cwd=repo, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return repo, json.loads(proc.stdout)["run_id"], proc.stderr
