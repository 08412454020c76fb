"""A command's writes reach the policy step, whatever the file tools wrote around them.

The policy judges the diff one file's part at a time and keeps the verdicts of parts it
saw before, so a file the file tools wrote cleanly in one iteration is not read again in
the next while its part stays the same. A command (an allowed ``run``) that rewrites
such a file afterwards, before or after more file-tool writes in its turn, must still be
caught: forbidden patterns it adds and lines past the diff limit. Real runs of the CLI
with a scripted model in a real repository.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from tests.support.cli import scripted_json_run
from tests.support.git_repos import git_repo

PY = Path(sys.executable).name

TEMPLATE = """\
looprun: 1
name: t
plan: {mode: none}
act:
  prompt: go
  tools: [write_file, run]
  constraints:
    paths: {allow: ["**"]}
    commands: {allow: ["%(py)s tools/*"]}
    max_diff_lines: 20
    forbidden_patterns: ["breakpoint()"]
observe:
  d: {parser: git_diff}
exit: ["policy.violations == 0 and iteration >= 3"]
refine:
  - if: policy.violations > 0
    then: {abort: "{{ policy.summary }}"}
  - else: {retry: again}
limits: {max_iterations: 3}
"""

# what the command writes into notes/a.txt, which the file tools wrote cleanly before
APPEND_FORBIDDEN = (
    "import pathlib\np = pathlib.Path('notes/a.txt')\n"
    "p.write_text(p.read_text() + 'breakpoint()\\n')\n"
)
APPEND_LINES = (
    "import pathlib\np = pathlib.Path('notes/a.txt')\np.write_text(p.read_text() + 'x\\n' * 30)\n"
)


def write(path: str, content: str) -> dict[str, Any]:
    return {"name": "write_file", "arguments": {"path": path, "content": content}}


def run(command: str) -> dict[str, Any]:
    return {"name": "run", "arguments": {"command": command}}


def _run(tmp_path: Path, second: list[dict[str, Any]]) -> dict[str, Any]:
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "src" / "app.py").write_text("x = 1\n")
    git_repo(work)
    first = [write("notes/a.txt", "clean\n"), write("notes/b.txt", "clean too\n")]
    turns = [
        {"text": "first", "tool_calls": first},
        {"text": "ok"},
        {"text": "second", "tool_calls": second},
        {"text": "ok"},
        {"text": "third", "tool_calls": [write("notes/d.txt", "last\n")]},
        {"text": "ok"},
    ]
    return scripted_json_run(tmp_path, work, TEMPLATE % {"py": PY}, turns)[1]


def test_clean_writes_alone_pass_every_iteration(tmp_path: Path) -> None:
    """The premise: without the command's write, nothing is found and the run is done."""
    summary = _run(tmp_path, [write("notes/c.txt", "fine\n")])
    assert summary["outcome"] == "done", summary


@pytest.mark.parametrize("order", ["command-last", "command-first"])
@pytest.mark.parametrize(
    ("script", "found"),
    [
        (APPEND_FORBIDDEN, "forbidden pattern 'breakpoint()' added at notes/a.txt:2"),
        (APPEND_LINES, "the limit is 20"),
    ],
    ids=["forbidden-pattern", "diff-limit"],
)
def test_a_command_rewriting_a_file_judged_clean_before_is_caught(
    tmp_path: Path, script: str, found: str, order: str
) -> None:
    tool = [write("tools/edit.py", script)]
    more = [write("notes/c.txt", "fine\n")]
    command = [run(f"{PY} tools/edit.py")]
    second = tool + more + command if order == "command-last" else tool + command + more
    summary = _run(tmp_path, second)
    assert summary["outcome"] == "aborted", summary
    assert summary["iterations"] == 2, summary
    assert found in summary["reason"], summary
