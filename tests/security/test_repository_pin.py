"""The engine's git calls use the repository found when the run started.

A command the model runs may rewrite a linked worktree's ``.git`` file to name a git
directory of its own, or plant ``core.worktree`` in ``.git/config``: found by discovery,
either would aim the engine's rollback at a work tree outside the workdir. Real runs of
the CLI with a scripted model in real repositories and real ``git worktree``s.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.security.test_sandbox import needs_bwrap
from tests.support.cli import looprun
from tests.support.git_repos import git_repo
from tests.support.invoice_bug import journal_of

PY = Path(sys.executable).name
TEMPLATE = f"""\
looprun: 1
name: t
plan: {{mode: none}}
act:
  prompt: go
  tools: [write_file, run]
  constraints:
    paths: {{allow: ["**"]}}
    commands: {{allow: ["{PY} tools/*"]}}
observe:
  d: {{parser: git_diff}}
exit: ["iteration > 1"]
refine:
  - else: {{rollback: base}}
limits: {{max_iterations: 1}}
"""
# Run inside the workdir: a git directory of its own that borrows the repository's
# objects and refs, with its work tree set to OUTSIDE, named by the worktree's .git.
REDIRECT = """\
import pathlib, shutil
common, head, outside = %r, %r, %r
fake = pathlib.Path("fake.git")
shutil.copytree(common + "/refs", fake / "refs")
(fake / "objects" / "info").mkdir(parents=True)
(fake / "objects" / "info" / "alternates").write_text(common + "/objects\\n")
(fake / "HEAD").write_text(head + "\\n")
core = "[core]\\n\\trepositoryformatversion = 0\\n\\tworktree = " + outside + "\\n"
(fake / "config").write_text(core)
pathlib.Path(".git").write_text("gitdir: fake.git\\n")
"""
PLANT = """\
import subprocess
subprocess.run(["git", "config", "core.worktree", %r], check=True)
"""


def _repo(path: Path) -> Path:
    (path / "src").mkdir(parents=True)
    (path / "src" / "app.py").write_text("x = 1\n")
    return git_repo(path)


def _looprun(
    tmp_path: Path, work: Path, template: str, calls: list[dict[str, Any]], sandbox: str
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "t.yaml").write_text(template)
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump([{"text": "working", "tool_calls": calls}, {"text": "ok"}]))
    proc = looprun(
        "t.yaml", "--intent", "x", "--workdir", str(work), "--model", f"script:{script}",
        "--json", "--sandbox", sandbox, cwd=tmp_path,
    )  # fmt: skip
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def _run(tmp_path: Path, work: Path, tool: str, sandbox: str) -> dict[str, Any]:
    """One iteration: write the tool and a change, run the tool, roll back to the base."""
    calls = [
        {"name": "write_file", "arguments": {"path": "tools/t.py", "content": tool}},
        {"name": "write_file", "arguments": {"path": "src/app.py", "content": "x = 2\n"}},
        {"name": "run", "arguments": {"command": f"{PY} tools/t.py"}},
    ]
    return json.loads(_looprun(tmp_path, work, TEMPLATE, calls, sandbox).stdout)


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def worktree(tmp_path: Path) -> Path:
    main = _repo(tmp_path / "main")
    work = tmp_path / "work"
    _git(main, "worktree", "add", "-q", "-b", "side", str(work))
    return work


@pytest.mark.parametrize("sandbox", [pytest.param("required", marks=needs_bwrap), "off"])
def test_a_rewritten_worktree_git_file_redirects_no_rollback(
    tmp_path: Path, worktree: Path, sandbox: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    before = (worktree / ".git").read_bytes()
    common = _git(worktree, "rev-parse", "--path-format=absolute", "--git-common-dir")
    head = _git(worktree, "rev-parse", "HEAD")
    summary = _run(tmp_path, worktree, REDIRECT % (common, head, str(outside)), sandbox)
    assert summary["outcome"] == "exhausted", summary
    _, events = journal_of(worktree)
    (ran,) = [e for e in events if e["event"] == "tool_call" and e["tool"] == "run"]
    assert "Read-only file system" in ran["result"] if sandbox != "off" else not ran["is_error"]
    assert list(outside.iterdir()) == [], "the rollback wrote the repository's files outside"
    assert (worktree / "src" / "app.py").read_text() == "x = 1\n", "rolled back in the workdir"
    assert (worktree / ".git").read_bytes() == before
    if sandbox == "off":  # the rewrite happened: it is reported, and undone
        rules = {e.get("rule") for e in events if e["event"] == "policy_violation"}
        assert "repository.changed" in rules, rules


def test_a_planted_core_worktree_redirects_no_rollback(tmp_path: Path) -> None:
    work = _repo(tmp_path / "work")
    outside = tmp_path / "outside"
    outside.mkdir()
    summary = _run(tmp_path, work, PLANT % str(outside), "off")
    assert summary["outcome"] == "exhausted", summary
    # the planted key was put back out right after the command, and reported
    assert "worktree" not in (work / ".git" / "config").read_text()
    _, events = journal_of(work)
    changed = {e["detail"] for e in events if e.get("rule") == "repository.changed"}
    assert changed == {".git/config"}, changed
    assert list(outside.iterdir()) == [], "the rollback wrote the repository's files outside"
    assert (work / "src" / "app.py").read_text() == "x = 1\n"


# Stores a harmless blob under the id of the file it then writes: git, finding an object
# under that id, keeps it, and every diff would read the harmless text.
PLANT_OBJECT = """\
import hashlib, pathlib, zlib
evil = b"import os\\nos." + b"system('echo pwned')\\n"
oid = hashlib.sha1(b"blob %d\\0" % len(evil) + evil).hexdigest()
harmless = b"x = 3\\n"
obj = pathlib.Path(".git/objects") / oid[:2] / oid[2:]
obj.parent.mkdir(exist_ok=True)
obj.write_bytes(zlib.compress(b"blob %d\\0" % len(harmless) + harmless))
pathlib.Path("src/app.py").write_bytes(evil)
"""


def test_a_planted_loose_object_does_not_hide_a_forbidden_pattern(tmp_path: Path) -> None:
    work = _repo(tmp_path / "work")
    template = (
        TEMPLATE.replace('paths: {allow: ["**"]}', 'paths: {allow: ["**"]}\n    '
                         'forbidden_patterns: ["os.system("]')
        .replace('exit: ["iteration > 1"]', 'exit: ["policy.violations == 0"]')
        .replace("{rollback: base}", "{abort: '{{ policy.summary }}'}")
    )  # fmt: skip
    calls = [
        {"name": "write_file", "arguments": {"path": "tools/t.py", "content": PLANT_OBJECT}},
        {"name": "run", "arguments": {"command": f"{PY} tools/t.py"}},
    ]
    proc = _looprun(tmp_path, work, template, calls, "off")
    assert "os.system(" in (work / "src" / "app.py").read_text()  # the trick ran
    assert proc.returncode != 0, proc.stdout
    summary = json.loads(proc.stdout) if proc.stdout.strip() else {}
    said = summary.get("reason", "") + proc.stderr
    assert "does not hold what its id says" in said or "src/app.py" in said, (said, summary)


# Replaces the object the engine itself stored for the file the model wrote (in-process,
# before this command ran) with a harmless blob under the same id.
REPLACE_OBJECT = """\
import hashlib, pathlib, zlib
evil = pathlib.Path("src/app.py").read_bytes()
oid = hashlib.sha1(b"blob %d\\0" % len(evil) + evil).hexdigest()
obj = pathlib.Path(".git/objects") / oid[:2] / oid[2:]
assert obj.exists(), "the engine stored the written file"
harmless = b"x = 3\\n"
obj.unlink()
obj.write_bytes(zlib.compress(b"blob %d\\0" % len(harmless) + harmless))
"""


def test_an_object_the_engine_stored_then_replaced_by_a_check_is_caught(
    tmp_path: Path,
) -> None:
    """The tree of the model's write is made in-process; a check that runs after it and
    swaps one of its objects leaves git the same tree id, whose objects are hashed again
    before any diff reads them."""
    work = _repo(tmp_path / "work")
    (work / "tools").mkdir()
    (work / "tools" / "t.py").write_text(REPLACE_OBJECT)
    _git(work, "add", "-A")
    _git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "tool")
    template = TEMPLATE.replace(
        "  d: {parser: git_diff}", f'  plant: {{run: "{PY} tools/t.py", parser: exit_code}}'
    )
    calls = [{"name": "write_file", "arguments": {"path": "src/app.py", "content": "x = 2\n"}}]
    proc = _looprun(tmp_path, work, template, calls, "off")
    summary = json.loads(proc.stdout) if proc.stdout.strip() else {}
    said = summary.get("reason", "") + proc.stderr
    assert "does not hold what its id says" in said, (said, summary)
