"""What a command writes in ``.git`` never changes what the engine's git does next.

Under the Landlock backend and with ``--sandbox off`` a command can write ``.git``: a
test the checks run can plant ``core.worktree`` or ``core.hooksPath`` in the config, a
command the model runs can add a hook or a replace ref that makes a changed file read as
harmless. Each is put back as it was before the command, reported as a
``repository.changed`` policy violation naming the file, and the run does not end
``done``. Real runs of the CLI with a scripted model in real repositories.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.security.test_sandbox import needs_landlock
from tests.support.cli import looprun, scripted_run
from tests.support.git_repos import git_repo
from tests.support.invoice_bug import journal_of

from looprun.workspace.control import ControlFiles
from looprun.workspace.git import Git, _system_safe_directories
from looprun.workspace.tree import Workspace

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
    forbidden_patterns: ["os.system("]
observe:
  tests: {{run: "{PY} check.py", parser: exit_code}}
exit: ["tests.ok and policy.violations == 0"]
refine:
  - if: policy.violations > 0
    then: {{abort: "{{{{ policy.summary }}}}"}}
  - else: {{retry: again}}
limits: {{max_iterations: 2}}
"""
# the check of the repository: passes, and (when planting) writes into the config
CHECK = "import sys\nsys.exit(0)\n"
PLANTING_CHECK = """\
import pathlib
with open(".git/config", "a") as fh:
    fh.write("[core]\\n\\tworktree = %s\\n\\thooksPath = hooks-of-the-test\\n")
"""
# a command the model runs: a hook that would leave a mark when git runs it
HOOK = """\
import os, pathlib
hook = pathlib.Path(".git/hooks/post-index-change")
hook.write_text("#!/bin/sh\\ntouch %s\\n")
os.chmod(hook, 0o755)
"""
# a command the model runs: the file it writes reads, through a replace ref, as harmless
REPLACE = """\
import pathlib, subprocess
def blob(text):
    return subprocess.run(["git", "hash-object", "-w", "--stdin"], input=text,
                          capture_output=True, text=True, check=True).stdout.strip()
evil = "import os\\nos." + "system('echo pwned')\\n"
pathlib.Path("src/app.py").write_text(evil)
subprocess.run(["git", "replace", blob(evil), blob("x = 3\\n")], check=True)
"""
SANDBOXES = [
    pytest.param("landlock", marks=needs_landlock, id="landlock"),
    pytest.param("off", id="off"),
]


def _repo(path: Path, check: str) -> Path:
    (path / "src").mkdir(parents=True)
    (path / "src" / "app.py").write_text("x = 1\n")
    (path / "check.py").write_text(check)
    return git_repo(path)


def _run(tmp_path: Path, work: Path, calls: list[dict[str, Any]], sandbox: str) -> dict[str, Any]:
    (tmp_path / "t.yaml").write_text(TEMPLATE)
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump([{"text": "working", "tool_calls": calls}, {"text": "ok"}]))
    args = scripted_run("t.yaml", intent="x", workdir=work, script=script)
    mode = "off" if sandbox == "off" else "required"
    env = {"LOOPRUN_SANDBOX_BACKENDS": "landlock"}
    proc = looprun(*args, "--json", "--sandbox", mode, cwd=tmp_path, env=env)
    assert "Traceback" not in proc.stderr, proc.stderr
    _, events = journal_of(work)
    (started,) = [e for e in events if e["event"] == "run_started"]
    assert started["sandbox"]["backend"] == (None if sandbox == "off" else "landlock")
    return json.loads(proc.stdout)


def _tool_write(path: str, content: str) -> dict[str, Any]:
    return {"name": "write_file", "arguments": {"path": path, "content": content}}


def _tool(path: str, content: str) -> list[dict[str, Any]]:
    """Write a tool script and run it, as the model would."""
    return [
        {"name": "write_file", "arguments": {"path": path, "content": content}},
        {"name": "run", "arguments": {"command": f"{PY} {path}"}},
    ]


def _reported(work: Path) -> set[str]:
    _, events = journal_of(work)
    return {
        e["detail"]
        for e in events
        if e["event"] == "policy_violation" and e.get("rule") == "repository.changed"
    }


def _git(work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=work, capture_output=True, text=True, check=False)


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_config_a_check_plants_is_put_back_and_reported(tmp_path: Path, sandbox: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    work = _repo(tmp_path / "work", PLANTING_CHECK % outside)
    config = (work / ".git" / "config").read_bytes()
    summary = _run(tmp_path, work, [_tool_write("src/app.py", "x = 2\n")], sandbox)
    assert summary["outcome"] != "done", summary
    assert (work / ".git" / "config").read_bytes() == config
    assert ".git/config" in _reported(work)
    assert list(outside.iterdir()) == []
    # the engine's diff is of this work tree: the model's edit, nothing else
    assert summary["state"]["changed_files"] == ["src/app.py"], summary
    assert "-x = 1\n+x = 2" in summary["state"]["diff"]
    assert (work / "src" / "app.py").read_text() == "x = 2\n"


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_hook_a_command_adds_is_removed_and_reported(tmp_path: Path, sandbox: str) -> None:
    work = _repo(tmp_path / "work", CHECK)
    mark = tmp_path / "hook-ran"
    summary = _run(tmp_path, work, _tool("tools/hook.py", HOOK % mark), sandbox)
    assert summary["outcome"] != "done", summary
    assert not (work / ".git" / "hooks" / "post-index-change").exists()
    assert ".git/hooks/post-index-change" in _reported(work)
    assert not mark.exists(), "git ran the hook a command planted"


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_replace_ref_does_not_make_the_diff_lie(tmp_path: Path, sandbox: str) -> None:
    work = _repo(tmp_path / "work", CHECK)
    summary = _run(tmp_path, work, _tool("tools/replace.py", REPLACE), sandbox)
    assert "os.system(" in (work / "src" / "app.py").read_text()  # the trick ran
    assert summary["outcome"] != "done", summary
    assert _git(work, "replace", "-l").stdout == ""
    reported = _reported(work)
    assert any(name.startswith(".git/refs/replace/") for name in reported), reported
    # the engine's diff read the file as it is: the forbidden pattern was seen
    _, events = journal_of(work)
    found = [e for e in events if e.get("rule") == "pattern.forbidden"]
    assert [e["detail"] for e in found] == ["src/app.py:2: os.system('echo pwned')"], events


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_commands_that_only_read_the_repository_are_not_flagged(
    tmp_path: Path, sandbox: str
) -> None:
    work = _repo(tmp_path / "work", CHECK)
    reader = "import subprocess\nsubprocess.run(['git', 'status'], check=True)\n"
    calls = [*_tool("tools/read.py", reader), _tool_write("src/app.py", "x = 2\n")]
    summary = _run(tmp_path, work, calls, sandbox)
    assert summary["outcome"] == "done", summary
    assert _reported(work) == set()


# -- the held files themselves, in a real repository -------------------------------------


def _held(tmp_path: Path) -> tuple[Path, ControlFiles]:
    work = _repo(tmp_path / "work", CHECK)
    return work, ControlFiles(work / ".git", work / ".git", shown_from=work)


def test_content_mode_and_presence_come_back_exactly(tmp_path: Path) -> None:
    work, held = _held(tmp_path)
    git = work / ".git"
    config, sample = (git / "config").read_bytes(), git / "hooks" / "pre-commit.sample"
    mode = sample.stat().st_mode
    assert held.verify() == []
    _git(work, "config", "core.fsmonitor", "touch pwned")
    _git(work, "config", "include.path", "/elsewhere/config")
    sample.chmod(0o600)
    (git / "info" / "sparse-checkout").write_text("/nothing\n")
    (git / "objects" / "info" / "alternates").write_text("/elsewhere/objects\n")
    (git / "shallow").write_text(_git(work, "rev-parse", "HEAD").stdout)
    assert sorted(held.verify()) == [
        ".git/config",
        ".git/hooks/pre-commit.sample",
        ".git/info/sparse-checkout",
        ".git/objects/info/alternates",
        ".git/shallow",
    ]
    assert (git / "config").read_bytes() == config
    assert sample.stat().st_mode == mode
    assert not (git / "info" / "sparse-checkout").exists() and not (git / "shallow").exists()
    assert not (git / "objects" / "info" / "alternates").exists()
    assert held.verify() == []


def test_a_hooks_directory_swapped_for_a_link_is_put_back_without_writing_through_it(
    tmp_path: Path,
) -> None:
    work, held = _held(tmp_path)
    hooks = work / ".git" / "hooks"
    names = sorted(p.name for p in hooks.iterdir())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(hooks)
    hooks.symlink_to(elsewhere)
    assert ".git/hooks" in held.verify()
    assert hooks.is_dir() and not hooks.is_symlink()
    assert sorted(p.name for p in hooks.iterdir()) == names
    assert list(elsewhere.iterdir()) == []


def test_packed_replace_refs_go_and_the_other_packed_refs_stay(tmp_path: Path) -> None:
    work, held = _held(tmp_path)
    _git(work, "tag", "v1")
    _git(work, "pack-refs", "--all")
    held.take()  # the user's packed tag is part of the repository as it was
    blob = _git(work, "hash-object", "-w", "check.py").stdout.strip()
    other = _git(work, "hash-object", "-w", "src/app.py").stdout.strip()
    _git(work, "replace", blob, other)
    _git(work, "pack-refs", "--all")
    assert f"refs/replace/{blob}" in (work / ".git" / "packed-refs").read_text()
    assert held.verify() == [".git/packed-refs"]
    assert _git(work, "replace", "-l").stdout == ""
    assert (
        _git(work, "rev-parse", "v1").stdout.strip()
        == _git(work, "rev-parse", "HEAD").stdout.strip()
    )


def test_the_engines_git_reads_an_object_as_its_id_says(tmp_path: Path) -> None:
    work = _repo(tmp_path / "work", CHECK)
    blob = _git(work, "hash-object", "-w", "check.py").stdout.strip()
    other = _git(work, "hash-object", "-w", "src/app.py").stdout.strip()
    _git(work, "replace", blob, other)
    assert _git(work, "cat-file", "-p", blob).stdout == "x = 1\n"  # git's default
    assert Git(work).pinned().run("cat-file", "-p", blob) == CHECK


@pytest.mark.skipif(os.geteuid() != 0, reason="needs to give the repository to another user")
def test_a_repository_the_system_config_trusts_stays_usable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = _repo(tmp_path / "work", CHECK)
    subprocess.run(["chown", "-R", "nobody", str(work)], check=True)
    system = tmp_path / "gitconfig"
    system.write_text(f"[safe]\n\tdirectory = {work}\n")
    monkeypatch.setenv("GIT_CONFIG_SYSTEM", str(system))
    _system_safe_directories.cache_clear()
    try:
        assert Git(work).is_repo()
    finally:
        _system_safe_directories.cache_clear()


def test_a_fifo_or_a_deep_tree_a_command_leaves_is_removed_without_hanging(
    tmp_path: Path,
) -> None:
    work, held = _held(tmp_path)
    info = work / ".git" / "info"
    os.mkfifo(info / "attributes")
    (info / "d").mkdir()
    fd = os.open(info / "d", os.O_RDONLY)
    for _ in range(1100):  # deeper than Python's recursion limit
        os.mkdir("d", dir_fd=fd)
        fd, parent = os.open("d", os.O_RDONLY, dir_fd=fd), fd
        os.close(parent)
    os.close(fd)
    assert held.verify() == [".git/info/attributes"]
    assert sorted(p.name for p in info.iterdir()) == ["exclude"]


def test_the_engines_own_worktrees_are_not_reported_and_their_pointers_are_held(
    tmp_path: Path,
) -> None:
    work = _repo(tmp_path / "work", CHECK)
    ws = Workspace.open(work, state_dir=work / ".looprun")
    head = _git(work, "rev-parse", "HEAD").stdout.strip()
    sub = ws.add_worktree(tmp_path / "sub", "looprun/sub", head)
    sub.touched()
    ws.touched()
    assert ws.repository_changed() == [] and sub.repository_changed() == []
    # a linked worktree's own pointers are held too
    commondir = work / ".git" / "worktrees" / "sub" / "commondir"
    before = commondir.read_bytes()
    commondir.write_text(str(tmp_path / "elsewhere") + "\n")
    sub.touched()
    assert [path for path, _ in sub.repository_changed()] == [str(commondir)]
    assert commondir.read_bytes() == before
    ws.discard_worktree(tmp_path / "sub", "looprun/sub")
    ws.touched()
    assert ws.repository_changed() == []
