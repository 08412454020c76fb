"""A team running looprun in CI every day: what stderr says, Ctrl-C and SIGTERM, two runs
in one checkout, a wrong test command, and the demo on an interpreter that lacks the tools.
Every test drives the real CLI in a subprocess on a real git repository."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest
from e2e_helpers import REPO, git_init, looprun, run_dirs, start

from looprun.system.resources import schemas_dir

TEMPLATE = """\
looprun: 1
name: mini
inputs:
  intent: {type: string, required: true}
  test_command: {type: command, default: "python -m pytest -q -p no:cacheprovider"}
plan: {mode: none}
act:
  prompt: "{{ intent }}"
  tools: [read_file, write_file, edit_file]
  constraints:
    paths: {allow: ["src/**", "tests/**"]}
observe:
  tests:
    run: "{{ inputs.test_command }} --junitxml={{ run.artifacts }}/junit.xml"
    parser: junit
    file: "{{ run.artifacts }}/junit.xml"
    timeout: 60s
  diff: {parser: git_diff}
exit: [tests.ok]
refine:
  - else: {retry: "{{ tests.feedback }}"}
limits: {max_iterations: 3, max_repeats: 10}
"""

# A wrong fix first (the test still fails), then nothing: the run ends exhausted.
WRONG_FIX = """\
- tool_calls:
    - name: edit_file
      arguments: {path: src/calc.py, old: "a - b", new: "a * b"}
- text: "Fixed."
- text: "Still looking."
- text: "Still looking."
"""


def project(tmp: Path, *, slow_s: float = 0.0) -> tuple[Path, Path, Path]:
    """A repository with one bug (``add`` subtracts), the template and the script.

    The test takes ``slow_s`` seconds while the file ``tmp/slow`` exists (outside the
    repository), so a test can hold a run in its observation, then let it go on quickly.
    """
    if slow_s:
        (tmp / "slow").write_text("")
    repo = tmp / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "src" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "tests" / "test_calc.py").write_text(
        "import pathlib\nimport sys\nimport time\n\n"
        "sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / 'src'))\n"
        "from calc import add  # noqa: E402\n\n\n"
        "def test_add():\n"
        f"    if pathlib.Path({str(tmp / 'slow')!r}).exists():\n"
        f"        time.sleep({slow_s})\n"
        "    assert add(2, 3) == 5\n"
    )
    git_init(repo)
    template = tmp / "mini.yaml"
    template.write_text(TEMPLATE)
    script = tmp / "script.yaml"
    script.write_text(WRONG_FIX)
    return repo, template, script


def run_args(repo: Path, template: Path, script: Path, *extra: str) -> list[str]:
    return [
        str(template),
        "--intent",
        "add() must add",
        "--workdir",
        str(repo),
        "--model",
        f"script:{script}",
        *extra,
    ]


def iteration_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("#")]


def test_progress_line_says_which_test_failed_and_how(tmp_path: Path) -> None:
    repo, template, script = project(tmp_path)
    proc = looprun(*run_args(repo, template, script, "--max-iterations", "1"))
    assert proc.returncode == 3, proc.stderr
    (line,) = iteration_lines(proc.stderr)
    # the failing test's id and its assertion, not just "1 failed"
    assert "tests: FAILED (1 tests, 1 failed: tests/test_calc.py::test_add: " in line, line
    assert "assert 6 == 5" in line, line


def test_unfinished_verdict_says_where_things_stand(tmp_path: Path) -> None:
    repo, template, script = project(tmp_path)
    proc = looprun(*run_args(repo, template, script))
    assert proc.returncode == 3, proc.stderr
    tail = proc.stderr.split("→ exhausted", 1)[1].splitlines()
    text = "\n".join(tail)
    assert "tasks completed: none (0 of 1)" in text
    assert "changed so far: src/calc.py (+1 -1)" in text  # a diff stat, not only names
    failure = next(ln for ln in tail if "last failure:" in ln)
    assert "[tests]" not in failure  # the observer header says nothing
    assert "tests: 0 passed, 1 failed" in failure
    assert "tests/test_calc.py::test_add" in text
    # an exhausted run is over: no hint at a resume that would be refused
    assert "looprun resume" not in text
    run_id = run_dirs(repo)[0].name
    refused = looprun("resume", run_id, "--workdir", str(repo))
    assert refused.returncode == 2 and "already ended exhausted" in refused.stderr


def test_a_test_command_that_does_not_exist_is_named_in_the_progress_line(
    tmp_path: Path,
) -> None:
    repo, template, script = project(tmp_path)
    # a compound command: the preflight leaves it to the shell, which says 127 at the
    # baseline observation, before any model call (a plain `nosuchtool -q` is refused
    # even earlier; see test_preflight.py)
    proc = looprun(*run_args(repo, template, script, "--set", "test_command=cd . && nosuchtool -q"))
    assert proc.returncode == 1, proc.stderr  # stops at once: no retry can fix it
    assert "the shell exited 127" in proc.stderr
    assert iteration_lines(proc.stderr) == []  # no act turn was spent
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("baseline: ")]
    assert "tests: ERROR (" in line
    assert "exit 127" in line and "nosuchtool: not found" in line, line
    assert ".looprun/runs/" not in line  # the run directory is noise in a progress line


def _validator() -> jsonschema.Draft202012Validator:
    schema = json.loads((schemas_dir() / "journal-event.schema.json").read_text())
    return jsonschema.Draft202012Validator(schema)


def _wait_for_line(proc: subprocess.Popen[str], prefix: str, timeout: float = 60) -> list[str]:
    assert proc.stderr is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
        if line.startswith(prefix):
            return seen
    raise AssertionError(f"no line starting {prefix!r} in: {''.join(seen)}")


@pytest.mark.parametrize(
    "sig",
    [signal.SIGINT, pytest.param(signal.SIGTERM, marks=pytest.mark.slow)],
    ids=["SIGINT", "SIGTERM"],
)
def test_a_signal_mid_run_is_recorded_and_the_run_resumes(
    sig: signal.Signals, tmp_path: Path
) -> None:
    # each test run takes 1.5 s: the signal lands inside iteration 2's observation
    repo, template, script = project(tmp_path, slow_s=1.5)
    proc = start(*run_args(repo, template, script, "--json"))
    _wait_for_line(proc, "#1 ")
    time.sleep(0.5)
    proc.send_signal(sig)
    (tmp_path / "slow").unlink()  # the resumed run need not wait
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    summary = json.loads(out)  # stdout is the JSON summary, and nothing else
    assert summary["outcome"] == "interrupted"
    assert summary["iterations"] == 1
    assert summary["state"]["changed_files"] == ["src/calc.py"]
    assert "tests/test_calc.py::test_add" in summary["state"]["last_failure"]
    assert "→ interrupted after 1 iteration(s)" in err
    (run_dir,) = run_dirs(repo)
    events = [json.loads(ln) for ln in (run_dir / "journal.jsonl").read_text().splitlines()]
    assert events[-1]["event"] == "interrupted"
    assert events[-1]["signal"] == sig.name
    for event in events:
        _validator().validate(event)
    assert json.loads((run_dir / "summary.json").read_text())["outcome"] == "interrupted"
    assert json.loads((run_dir / "state.json").read_text())["iterations"] == 1
    listed = looprun("runs", "--workdir", str(repo), "--json")
    assert json.loads(listed.stdout)[0]["outcome"] == "interrupted"
    assert sig.name in json.loads(listed.stdout)[0]["reason"]
    resumed = looprun("resume", run_dir.name, "--workdir", str(repo), "--json")
    assert resumed.returncode == 3, resumed.stderr
    assert json.loads(resumed.stdout)["iterations"] == 3
    assert [ln[:3] for ln in iteration_lines(resumed.stderr)] == ["#2 ", "#3 "]
    # resume keeps the baseline the run recorded: it is observed once, before iteration 1
    events = [json.loads(ln) for ln in (run_dir / "journal.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events].count("baseline") == 1
    assert "baseline: " not in resumed.stderr


def test_a_second_run_in_the_same_checkout_is_refused_while_the_first_runs(
    tmp_path: Path,
) -> None:
    repo, template, script = project(tmp_path, slow_s=1.0)
    first = start(*run_args(repo, template, script, "--json", "--max-iterations", "2"))
    _wait_for_line(first, "plan:")
    second = looprun(*run_args(repo, template, script, "--json"))
    assert second.returncode == 1, second.stderr
    assert second.stdout == ""
    assert "is still running in" in second.stderr and "worktree" in second.stderr
    running = run_dirs(repo)[0].name
    assert running in second.stderr  # the holder is named
    resumed = looprun("resume", running, "--workdir", str(repo))
    assert resumed.returncode == 1 and "is still running" in resumed.stderr
    (tmp_path / "slow").unlink()
    out, err = first.communicate(timeout=90)
    assert first.returncode == 3, err
    assert json.loads(out)["outcome"] == "exhausted"
    assert len(run_dirs(repo)) == 1  # the refused run left nothing behind
    again = looprun(*run_args(repo, template, script, "--max-iterations", "1"))
    assert again.returncode == 3, again.stderr  # the lock went with the first run


def test_demo_on_an_interpreter_without_the_tools_says_what_to_install(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    python = bare / "bin" / "python"
    proc = subprocess.run(
        [str(python), str(REPO / "samples" / "demo.py"), "invoice"],
        capture_output=True,
        text=True,
        env={"PATH": str(bare / "bin"), "HOME": str(tmp_path)},
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert "looprun, pytest, ruff" in proc.stderr
    assert "pip install -e '.[test]'" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert "scratch copy" not in proc.stderr  # nothing was started


FIX_AND_ADD = """\
- tool_calls:
    - name: edit_file
      arguments: {path: src/calc.py, old: "a - b", new: "a + b"}
    - name: write_file
      arguments: {path: tests/test_more.py, content: "def test_more():\\n    assert True\\n"}
- text: "Fixed."
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout


def test_commit_takes_only_the_runs_changes_and_leaves_the_users_work_alone(
    tmp_path: Path,
) -> None:
    repo, template, script = project(tmp_path)
    script.write_text(FIX_AND_ADD)
    (repo / "NOTES.txt").write_text("my notes\n")
    _git(repo, "add", "NOTES.txt")  # staged, not committed
    (repo / "scratch.txt").write_text("untracked\n")
    with open(repo / "tests" / "test_calc.py", "a") as fh:
        fh.write("# my uncommitted edit\n")
    proc = looprun(*run_args(repo, template, script, "--commit"))
    assert proc.returncode == 0, proc.stderr
    subject, *files = _git(repo, "show", "--name-only", "--format=%s", "HEAD").split("\n")
    assert subject == "looprun mini: add() must add"
    assert sorted(f for f in files if f) == ["src/calc.py", "tests/test_more.py"], files
    # the user's work: still staged, still modified, still untracked, unchanged
    status = _git(repo, "status", "--porcelain").splitlines()
    assert set(status) == {"A  NOTES.txt", " M tests/test_calc.py", "?? scratch.txt"}
    assert (repo / "tests" / "test_calc.py").read_text().endswith("# my uncommitted edit\n")
    assert "# my uncommitted edit" not in _git(repo, "show", "HEAD:tests/test_calc.py")
    assert _git(repo, "show", "HEAD:src/calc.py") == "def add(a, b):\n    return a + b\n"
    assert "committed" in proc.stderr and "(2 file(s))" in proc.stderr
