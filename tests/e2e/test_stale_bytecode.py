"""Checks judge the code on disk, never bytecode Python cached for an earlier version.

Python reuses a ``.pyc`` while its source keeps the size and the mtime second it was
compiled from. Two same-size edits within one second (``a * b`` then ``a + b``, quick
iterations) would otherwise have the second iteration's tests run the first edit's code.
Here each edit is pinned to one mtime on purpose, so the collision is certain."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from tests.support.cli import looprun
from tests.support.git_repos import git_repo

TEMPLATE = """\
looprun: 1
name: same-second
inputs:
  intent: {type: string, required: true}
plan: {mode: none}
act:
  prompt: "{{ intent }}"
  tools: [edit_file, run]
  constraints:
    commands: {allow: ["python3 pin_mtime.py"]}
observe:
  tests:
    run: "python -m pytest -q -p no:cacheprovider --junitxml={{ run.artifacts }}/junit.xml"
    parser: junit
    file: "{{ run.artifacts }}/junit.xml"
exit: [tests.ok]
refine:
  - else: {retry: "{{ tests.feedback }}"}
limits: {max_iterations: 2, max_repeats: false}
"""

PIN = "import os\nos.utime('calc.py', (1700000000, 1700000000))\n"


def _turn(old: str, new: str) -> list[dict]:
    edit = {"name": "edit_file", "arguments": {"path": "calc.py", "old": old, "new": new}}
    pin = {"name": "run", "arguments": {"command": "python3 pin_mtime.py"}}
    return [{"tool_calls": [edit, pin]}, {"text": "done"}]


def test_a_same_size_edit_in_the_same_mtime_second_is_what_the_tests_run(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (work / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n"
                                       "    assert add(2, 3) == 5\n")  # fmt: skip
    (work / "pin_mtime.py").write_text(PIN)
    (work / ".gitignore").write_text("__pycache__/\n")
    git_repo(work)
    (tmp_path / "t.yaml").write_text(TEMPLATE)
    script = _turn("a - b", "a * b") + _turn("a * b", "a + b")
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script))
    proc = looprun(
        str(tmp_path / "t.yaml"),
        *("--intent", "fix add", "--workdir", str(work), "--json"),
        *("--model", f"script:{tmp_path / 'script.yaml'}"),
        cwd=tmp_path,
        env={"PYTHONDONTWRITEBYTECODE": ""},  # as on a machine that caches bytecode
    )
    summary = json.loads(proc.stdout)
    assert "return a + b" in (work / "calc.py").read_text()
    assert (summary["outcome"], summary["iterations"]) == ("done", 2), proc.stderr
    assert not list(work.rglob("*.pyc"))  # nothing the run started cached bytecode
