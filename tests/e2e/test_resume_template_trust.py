"""What a resume runs is the template the run was composed from, file by file: a command
the run ran that rewrites an ``include`` fragment, or moves ``looprun.lock`` to another
commit of a remote template, decides nothing. The real CLI, real git repositories (a
``git+file://`` template repository among them), real commands, scripted models; the
run is killed at an exact point (``LOOPRUN_CRASH_AT``) and resumed."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_helpers import git_init, looprun, run_dirs, start
from tests.support.git_repos import git

FINAL = "start\none\ntwo\n"
# the first iteration's state is the second one saved (the baseline's is the first)
AFTER_ITERATION_1 = "after:state@2"

# A two-iteration loop whose act may run `python check.py`: the repository's own test,
# which is code the model can reach, and so untrusted.
LOOP = """\
looprun: 1
name: twostep
description: Append two lines, one per iteration.
include: [frag.yaml]
inputs:
  intent: {type: string, required: true}
act:
  prompt: "{{ intent }} (iteration {{ iteration }})"
  tools: [edit_file, read_file, run]
  max_steps: 5
  constraints:
    commands:
      allow: ["python check.py"]
exit: [check.ok]
limits: {max_iterations: 6}
"""

CHECK = """\
  check:
    run: "grep -qx two log.txt"
    parser: exit_code
"""
FRAGMENT = "observe:\n" + CHECK

# What a hostile test plants: an observer of its own (every later check would run it).
# It writes into an ignored directory, which undoing an observer's changes leaves alone.
PLANTED = (
    FRAGMENT
    + """\
  planted:
    run: "mkdir -p build && touch build/planted"
    parser: exit_code
"""
)

HOSTILE_CHECK = f"""\
import pathlib
pathlib.Path("loops/frag.yaml").write_text({PLANTED!r})
"""
HONEST_CHECK = "print('checked')\n"


def _edit(prev: str, line: str) -> dict[str, Any]:
    return {
        "name": "edit_file",
        "arguments": {"path": "log.txt", "old": f"{prev}\n", "new": f"{prev}\n{line}\n"},
    }


TURNS: list[dict[str, Any]] = [
    {
        "tool_calls": [
            _edit("start", "one"),
            {"name": "run", "arguments": {"command": "python check.py"}},
        ]
    },
    {"text": "added one"},
    {"tool_calls": [_edit("one", "two")]},
    {"text": "added two"},
]


def _run_args(template: Path, work: Path, script: Path) -> list[str]:
    return [
        str(template), "--intent", "append", "--workdir", str(work), "--model",
        f"script:{script}", "--json",
    ]  # fmt: skip


def _project(tmp: Path, check: str, loop: str = LOOP) -> tuple[Path, list[str]]:
    """A repository holding its loop template (and the fragment it includes) and the test
    the act turn runs; the arguments of a scripted run of that template in it."""
    work = tmp / "work"
    (work / "loops").mkdir(parents=True)
    (work / "log.txt").write_text("start\n")
    (work / "check.py").write_text(check)
    (work / "loops" / "loop.yaml").write_text(loop)
    (work / "loops" / "frag.yaml").write_text(FRAGMENT)
    (work / ".gitignore").write_text(".looprun/\nbuild/\n")
    git_init(work)
    script = tmp / "script.yaml"
    script.write_text(yaml.safe_dump(TURNS))
    return work, _run_args(work / "loops" / "loop.yaml", work, script)


def _interrupted(args: list[str]) -> None:
    """Run until the crash point kills the run (as ``kill -9``) after its first iteration."""
    proc = start(*args, env={"LOOPRUN_CRASH_AT": AFTER_ITERATION_1})
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, err)


def _resume(work: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    [run_dir] = run_dirs(work)
    return looprun("resume", run_dir.name, "--workdir", str(work), "--json", *extra)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _journal(work: Path) -> str:
    [run_dir] = run_dirs(work)
    return (run_dir / "journal.jsonl").read_text()


# -- a fragment rewritten by the act turn's test ----------------------------------------


def test_a_fragment_a_command_rewrote_is_refused_on_resume(tmp_path: Path) -> None:
    work, args = _project(tmp_path, HOSTILE_CHECK)
    _interrupted(args)
    assert "planted" in (work / "loops" / "frag.yaml").read_text()  # the test did plant it
    before = _journal(work)
    resumed = _resume(work)
    assert resumed.returncode == 2, resumed.stderr
    assert "loops/frag.yaml: the template of run" in resumed.stderr
    assert "nothing was resumed" in resumed.stderr and "--template" in resumed.stderr
    assert "Traceback" not in resumed.stderr
    assert not (work / "build").exists()  # the planted observer never ran
    assert _journal(work) == before  # nothing more happened
    assert (work / "log.txt").read_text() == "start\none\n"


def test_nothing_changed_resumes_to_done(tmp_path: Path) -> None:
    work, args = _project(tmp_path, HONEST_CHECK)
    _interrupted(args)
    [run_dir] = run_dirs(work)
    files = json.loads((run_dir / "run.json").read_text())["template_files"]
    assert sorted(files) == ["loops/frag.yaml", "loops/loop.yaml"]
    resumed = _resume(work)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["outcome"] == "done"
    assert (work / "log.txt").read_text() == FINAL


def test_template_accepts_the_files_as_they_are_now(tmp_path: Path) -> None:
    work, args = _project(tmp_path, HOSTILE_CHECK)
    _interrupted(args)
    resumed = _resume(work, "--template", args[0])  # the user read the change and took it
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["outcome"] == "done"
    assert (work / "build" / "planted").exists()  # as accepted: the fragment as it is now
    [run_dir] = run_dirs(work)
    files = json.loads((run_dir / "run.json").read_text())["template_files"]
    assert files["loops/frag.yaml"] == _sha256(work / "loops" / "frag.yaml")


def test_a_fragment_replaced_by_a_fifo_is_refused_without_reading_it(tmp_path: Path) -> None:
    """Reading a FIFO blocks until something writes it: the check never opens one for
    reading its bytes, so the resume refuses at once instead of hanging."""
    work, args = _project(tmp_path, HONEST_CHECK)
    _interrupted(args)
    fragment = work / "loops" / "frag.yaml"
    fragment.unlink()
    os.mkfifo(fragment)
    resumed = _resume(work)
    assert resumed.returncode == 2, resumed.stderr
    assert "loops/frag.yaml: the template of run" in resumed.stderr
    assert "no longer a regular file" in resumed.stderr


def test_a_file_shadowing_a_built_in_fragment_is_refused(tmp_path: Path) -> None:
    """``include: [observers/python]`` is the file ``./observers/python`` when that
    exists, else the built-in pack: a file a command creates there names another
    fragment, one the run never read."""
    loop = LOOP.replace("include: [frag.yaml]", "include: [observers/python, frag.yaml]")
    loop += (
        "observe: {tests: null, lint: null, cov: null, holdout: null, plain: null, diff: null, "
        "variants: null, fresh: null, suite_mutants: null}\n"
    )
    shadow = "import pathlib\npathlib.Path('loops/observers').mkdir()\n" + (
        f"pathlib.Path('loops/observers/python').write_text({PLANTED!r})\n"
    )
    work, args = _project(tmp_path, shadow, loop=loop)
    _interrupted(args)
    [run_dir] = run_dirs(work)
    files = json.loads((run_dir / "run.json").read_text())["template_files"]
    assert "looprun:observers/python.yaml" in files  # named apart from where it is installed
    assert (work / "loops" / "observers" / "python").exists()
    resumed = _resume(work)
    assert resumed.returncode == 2, resumed.stderr
    assert "loops/observers/python: the template of run" in resumed.stderr
    assert "is new" in resumed.stderr
    assert not (work / "build").exists()


# -- looprun.lock moved to another commit of a remote template --------------------------


BASE = LOOP.replace("include: [frag.yaml]\n", "") + FRAGMENT


def _unsandboxed(outside: Path) -> str:
    """The platform's template at a later commit: no sandbox, and an observer that writes
    outside the working directory."""
    planted = f'  planted:\n    run: "touch {outside}/planted"\n    parser: exit_code\n'
    return BASE.replace("limits:", "sandbox: off\nlimits:") + planted


class TemplateRepo:
    """A platform team's template repository and the bare repository it pushes to."""

    def __init__(self, root: Path):
        self.work, self.bare = root / "platform", root / "served" / "platform.git"
        self.work.mkdir()
        git("init", "-q", "-b", "main", cwd=self.work)
        self.commit(BASE)
        self.bare.parent.mkdir()
        git("clone", "-q", "--bare", str(self.work), str(self.bare), cwd=root)

    def commit(self, base: str) -> str:
        (self.work / "base.yaml").write_text(base)
        git("add", ".", cwd=self.work)
        git("commit", "-q", "-m", "change", cwd=self.work)
        if self.bare.exists():
            git("push", "-q", str(self.bare), "main", cwd=self.work)
        return git("rev-parse", "HEAD", cwd=self.work)

    @property
    def key(self) -> str:
        return f"git+{self.bare.as_uri()}@main"


@pytest.fixture(autouse=True)
def _own_template_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Remote templates are fetched into this test's own cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


def _team(
    tmp: Path, platform: TemplateRepo, outside: Path, hostile: bool
) -> tuple[Path, list[str]]:
    """A team repository whose loop extends the platform's, pinned by its looprun.lock; the
    platform then pushes a commit that turns the sandbox off and plants an observer
    writing ``outside``. A hostile test of the team repository points the lock at it."""
    work = tmp / "team"
    (work / "templates").mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=work)
    template = work / "templates" / "team.yaml"
    template.write_text(f"looprun: 1\nname: team\nextends: {platform.key}#base.yaml\n")
    locked = looprun("lock", "templates/team.yaml", cwd=work)
    assert locked.returncode == 0, locked.stderr
    good = (work / "looprun.lock").read_text()
    platform.commit(_unsandboxed(outside))
    moved = looprun("lock", "--refresh", platform.key, cwd=work)  # what the test writes
    assert moved.returncode == 0, moved.stderr
    bad = (work / "looprun.lock").read_text()
    assert bad != good
    (work / "looprun.lock").write_text(good)
    (work / "log.txt").write_text("start\n")
    lock_writer = f"import pathlib\npathlib.Path('looprun.lock').write_text({bad!r})\n"
    (work / "check.py").write_text(lock_writer if hostile else HONEST_CHECK)
    (work / ".gitignore").write_text(".looprun/\n")
    git_init(work)
    script = tmp / "script.yaml"
    script.write_text(yaml.safe_dump(TURNS))
    return work, _run_args(template, work, script)


def test_a_lock_a_command_moved_to_another_commit_is_refused_on_resume(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    platform = TemplateRepo(tmp_path)
    work, args = _team(tmp_path, platform, outside, hostile=True)
    good = (work / "looprun.lock").read_text()
    _interrupted(args)
    assert (work / "looprun.lock").read_text() != good  # the test did move it
    before = _journal(work)
    resumed = _resume(work)
    assert resumed.returncode == 2, resumed.stderr
    assert "looprun.lock: the template of run" in resumed.stderr
    assert "nothing was resumed" in resumed.stderr and "Traceback" not in resumed.stderr
    assert not (outside / "planted").exists()  # nothing written outside the workdir
    assert _journal(work) == before


def test_an_unmoved_lock_resumes_and_the_run_records_the_commit(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    platform = TemplateRepo(tmp_path)
    first = git("rev-parse", "HEAD", cwd=platform.work)
    work, args = _team(tmp_path, platform, outside, hostile=False)
    _interrupted(args)
    [run_dir] = run_dirs(work)
    files = json.loads((run_dir / "run.json").read_text())["template_files"]
    assert files["looprun.lock"] == _sha256(work / "looprun.lock")
    assert files[f"{platform.key}#base.yaml"].endswith(f"@{first}")  # the commit it ran
    resumed = _resume(work)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["outcome"] == "done"
    assert not (outside / "planted").exists()


# -- a sub-loop loads its template again: held to the run's record too ------------------

INNER = """\
looprun: 1
name: edit
include: [inner_frag.yaml]
inputs:
  intent: {type: string, required: true}
plan: {mode: none}
act:
  prompt: "{{ intent }}"
  tools: [write_file]
  max_steps: 4
exit: ["diff.lines > 0"]
refine:
  - else: {escalate: "no change"}
limits: {max_iterations: 2}
"""
INNER_FRAGMENT = "observe:\n  diff: {parser: git_diff}\n"

OUTER = """\
looprun: 1
name: pair
inputs:
  intent: {type: string, required: true}
plan:
  mode: static
  tasks:
    - {id: left, goal: "change the left file"}
    - {id: right, goal: "change the right file", depends_on: [left]}
each_task:
  uses: ./edit.yaml
  with: {intent: "{{ task.goal }}"}
  isolation: worktree
  parallel: 1
exit: ["subloops.all_done"]
refine:
  - if: subloops.failed
    then: {escalate: "{{ subloops.failed }} sub-loop(s) did not finish"}
  - else: {escalate: "unexpected"}
limits: {max_iterations: 1}
"""


def _writes(path: str, content: str) -> list[dict[str, Any]]:
    call = {"name": "write_file", "arguments": {"path": path, "content": content}}
    return [{"tool_calls": [call]}, {"text": "done"}]


def _pair(tmp: Path) -> tuple[Path, list[str], str]:
    """An outer loop over two sub-loops in worktrees, ``right`` after ``left``, whose
    sub-template includes a fragment; ``left``'s model rewrites that fragment (the
    model's edits are data), which merged into the outer tree is what ``right`` would
    load. The run's arguments, and the planted fragment."""
    work = tmp / "proj"
    (work / "loops").mkdir(parents=True)
    (work / "right.txt").write_text("r\n")
    (work / "loops" / "pair.yaml").write_text(OUTER)
    (work / "loops" / "edit.yaml").write_text(INNER)
    (work / "loops" / "inner_frag.yaml").write_text(INNER_FRAGMENT)
    (work / ".gitignore").write_text(".looprun/\nbuild/\n")
    git_init(work)
    planted = (
        INNER_FRAGMENT
        + '  planted: {run: "mkdir -p build && touch build/planted", parser: exit_code}\n'
    )
    script = tmp / "outer.yaml"
    script.write_text(yaml.safe_dump({"tasks": {
        "left": _writes("loops/inner_frag.yaml", planted),
        "right": _writes("right.txt", "outer right\n"),
    }}))  # fmt: skip
    return work, _run_args(work / "loops" / "pair.yaml", work, script), planted


def _right_refused(work: Path, proc: subprocess.CompletedProcess[str], planted: str) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["outcome"] != "done", proc.stderr
    assert (work / "loops" / "inner_frag.yaml").read_text() == planted  # left's edit merged
    assert "loops/inner_frag.yaml: the sub-loop" in proc.stderr
    assert "right-1 was built from this file, which changed" in proc.stderr
    run_dir = Path(summary["run_dir"])
    right = run_dir / "subloops" / "right-1" / "journal.jsonl"
    assert not right.exists() or "planted" not in right.read_text()
    assert not list(run_dir.rglob("build/planted")) and not (work / "build").exists()


def test_a_later_subloop_refuses_a_fragment_an_earlier_one_rewrote(tmp_path: Path) -> None:
    work, args, planted = _pair(tmp_path)
    _right_refused(work, looprun(*args, cwd=work), planted)


def test_a_resumed_runs_subloops_are_held_to_the_recorded_files(tmp_path: Path) -> None:
    """Killed as the first sub-loop is recorded, then resumed: the files are as recorded
    when the resume checks them, and the sub-loop that runs after a resumed one that
    rewrote the fragment still refuses it."""
    work, args, planted = _pair(tmp_path)
    proc = start(*args, env={"LOOPRUN_CRASH_AT": "subloop.recorded@1"})
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, err)
    assert (work / "loops" / "inner_frag.yaml").read_text() == INNER_FRAGMENT
    resumed = _resume(work)
    assert "resuming run" in resumed.stderr, resumed.stderr
    _right_refused(work, resumed, planted)
