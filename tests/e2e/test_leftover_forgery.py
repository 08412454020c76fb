"""A test the model writes cannot leave a process behind that rewrites a check's report.

Real runs of the CLI with a scripted model and real pytest, under bubblewrap (where the
command's PID namespace, not a reaper, ends what it left: ``system/pidns.py``), under
Landlock and with ``--sandbox off``. The new test starts a forger in a session of its own
(what ``setsid`` or ``nohup ... &`` give): it outlives its check and replaces the next
report it sees with one that says what the exit condition wants. Before every command ran
under a reaper, the forger survived a timeout under Landlock and anything without a sandbox,
and the engine read the forged report (the JUnit report of the next iteration, the
mutation report of the same one) and ended ``done``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import VACUOUS_UNIT_TESTS, looprun, scripted_backfill, summary_of
from tests.security.test_sandbox import needs_bwrap, needs_landlock
from tests.support.git_repos import git_repo

pytestmark = pytest.mark.e2e

SANDBOXES = [
    pytest.param(["--sandbox", "required"], {"LOOPRUN_SANDBOX_BACKENDS": "bwrap"},
                 marks=needs_bwrap, id="bwrap"),
    pytest.param(["--sandbox", "required"], {"LOOPRUN_SANDBOX_BACKENDS": "landlock"},
                 marks=needs_landlock, id="landlock"),
    pytest.param(["--sandbox", "off"], {}, id="off"),
]  # fmt: skip

# started by a test: a process in its own session that replaces REPORT with FORGED
# whenever it differs (a fresh report of a later check), for a minute
FORGER = r"""
import os, sys, time
report, forged = sys.argv[1], sys.argv[2]
end = time.time() + 60
while time.time() < end and os.path.isdir(os.path.dirname(report)):
    try:
        with open(report) as f:
            text = f.read()
    except OSError:
        text = None
    if text is not None and text != forged:
        with open(report + ".part", "w") as f:
            f.write(forged)
        os.replace(report + ".part", report)
    time.sleep(0.001)
"""

# what a forging test starts with: one forger, detached from the check
SPAWN = f'''\
import os, subprocess, sys

FORGER = {FORGER!r}


def forge(report, forged):
    subprocess.Popen(
        [sys.executable, "-c", FORGER, report, forged],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def artifacts():
    """The run's artifacts directory, from the JUnit option of the check (None when
    pytest runs otherwise, as under the mutation check)."""
    for arg in sys.argv:
        if arg.startswith("--junitxml="):
            return os.path.dirname(arg.split("=", 1)[1])
    return None
'''

# -- a later iteration's JUnit report ------------------------------------------------------

PY = Path(sys.executable).name
TEMPLATE = f"""\
looprun: 1
name: forge
plan: {{mode: none}}
act:
  prompt: go
  tools: [write_file]
  constraints:
    paths: {{allow: ["**"]}}
observe:
  tests:
    run: "{PY} -m pytest -q -p no:cacheprovider --junitxml={{{{ run.artifacts }}}}/junit.xml tests"
    parser: junit
    file: "{{{{ run.artifacts }}}}/junit.xml"
    timeout: 4s
exit: ["tests.ok and tests.passed >= 3"]
refine:
  - else: {{retry: again}}
limits: {{max_iterations: 2}}
"""
FORGED_JUNIT = (
    '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="3"'
    ' failures="0" errors="0" skipped="0">'
    + "".join(
        f'<testcase classname="tests.test_forge" name="test_forged_{n}" time="0.001"/>'
        for n in range(3)
    )
    + "</testsuite></testsuites>"
)
HANGING_TEST = (
    SPAWN
    + f"""
import time

forge(artifacts() + "/junit.xml", {FORGED_JUNIT!r})


def test_slow():
    time.sleep(30)  # past the check's timeout: a reaper killed with its command frees the forger
"""
)
PASSING_TEST = "def test_one():\n    assert 1 + 1 == 2\n"


def _write(path: str, content: str) -> dict[str, Any]:
    return {"name": "write_file", "arguments": {"path": path, "content": content}}


@pytest.mark.parametrize(("sandbox", "env"), SANDBOXES)
def test_a_leftover_cannot_rewrite_a_later_junit_report(
    tmp_path: Path, sandbox: list[str], env: dict[str, str]
) -> None:
    work = tmp_path / "work"
    (work / "tests").mkdir(parents=True)
    (work / "tests" / "__init__.py").write_text("")
    (work / "tests" / "test_base.py").write_text(PASSING_TEST.replace("one", "base"))
    git_repo(work)
    turns = [
        {"tool_calls": [_write("tests/test_forge.py", HANGING_TEST)]},
        {"text": "A test that hangs."},
        {"tool_calls": [_write("tests/test_forge.py", PASSING_TEST)]},
        {"text": "A test that passes."},
    ]
    (tmp_path / "script.json").write_text(json.dumps(turns))
    (tmp_path / "t.yaml").write_text(TEMPLATE)
    proc = looprun(
        "run", *sandbox, str(tmp_path / "t.yaml"), "--intent", "forge",
        "--workdir", str(work), "--model", f"script:{tmp_path / 'script.json'}", "--json",
        env=env, timeout=300,
    )  # fmt: skip
    summary = summary_of(proc)
    run_dir = Path(summary["run_dir"])
    records = [p.read_text() for p in sorted((run_dir / "observe").glob("*.json"))]
    assert len(records) == 3, summary  # the baseline and two iterations
    assert "timed out" in json.loads(records[1])["observers"]["tests"]["feedback"]
    assert summary["outcome"] != "done", records[-1]
    assert not any("test_forged_" in r for r in records), records[-1]


# -- the mutation report of a test_backfill run ----------------------------------------------

FORGED_MUTANTS = json.dumps(
    {"ok": True, "total": 20, "killed": 20, "survived": 0, "score": 1.0, "error": None,
     "tests": ["tests/test_cover.py"], "survivors": []}
)  # fmt: skip
# the suite's check starts a forger of the mutation check that follows it
VACUOUS = (
    SPAWN
    + f"""
if artifacts() is not None:
    forge(artifacts() + "/mutants.json", {FORGED_MUTANTS!r})
"""
    + VACUOUS_UNIT_TESTS
)


def test_a_leftover_cannot_rewrite_the_mutation_report(tmp_path: Path) -> None:
    """Tests that assert nothing leave most mutants alive; a forged report says all died.
    The forgery is in the first iteration's check: one iteration is the whole case."""
    summary, run_dir = scripted_backfill(
        tmp_path, VACUOUS, "--sandbox", "off", "--max-iterations", "1"
    )
    first = json.loads((run_dir / "observe" / "1.json").read_text())["observers"]
    assert summary["outcome"] != "done", first["mutants"]
    assert first["mutants"]["ran"] and first["mutants"]["score"] < 0.5, first["mutants"]


# -- the honest control -----------------------------------------------------------------------

WAITING_TEST = """\
import subprocess, sys


def test_children_are_waited_for():
    done = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True)
    assert done.stdout.strip() == "42"
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    assert child.wait() == 0
"""


@pytest.mark.parametrize(("sandbox", "env"), SANDBOXES)
def test_tests_that_wait_for_their_children_end_done(
    tmp_path: Path, sandbox: list[str], env: dict[str, str]
) -> None:
    work = tmp_path / "work"
    (work / "tests").mkdir(parents=True)
    (work / "tests" / "test_base.py").write_text(PASSING_TEST)
    git_repo(work)
    turns = [
        {"tool_calls": [_write("tests/test_children.py", WAITING_TEST)]},
        {"text": "A test that starts processes and waits for them."},
    ]
    (tmp_path / "script.json").write_text(json.dumps(turns))
    (tmp_path / "t.yaml").write_text(TEMPLATE.replace("tests.ok and tests.passed >= 3", "tests.ok"))
    proc = looprun(
        "run", *sandbox, str(tmp_path / "t.yaml"), "--intent", "test",
        "--workdir", str(work), "--model", f"script:{tmp_path / 'script.json'}", "--json",
        env=env, timeout=300,
    )  # fmt: skip
    summary = summary_of(proc)
    assert (summary["outcome"], summary["iterations"]) == ("done", 1), summary
    record = json.loads((Path(summary["run_dir"]) / "observe" / "1.json").read_text())
    tests = record["observers"]["tests"]
    assert tests["passed"] == 2 and "left" not in tests["feedback"], tests


# -- a runner killed from inside, its report written in its place -----------------------------

# under the mutation runner, the new tests' first run kills the runner (its parent) and
# writes the report it would have written: the command ends by a signal, the report is
# the test's
KILLS_ITS_RUNNER = (
    f"""\
import os, signal

_parent = open(f"/proc/{{os.getppid()}}/cmdline", "rb").read().split(b"\\0")
if any(b"looprun_mutants" in word for word in _parent):
    (_report,) = [w[9:].decode() for w in _parent if w.startswith(b"--report=")]
    os.kill(os.getppid(), signal.SIGKILL)
    with open(_report, "w") as fh:
        fh.write({FORGED_MUTANTS!r})
"""
    + VACUOUS_UNIT_TESTS
)


def test_a_test_that_kills_its_mutation_runner_cannot_write_its_report(tmp_path: Path) -> None:
    summary, run_dir = scripted_backfill(tmp_path, KILLS_ITS_RUNNER, "--max-iterations", "1")
    first = json.loads((run_dir / "observe" / "1.json").read_text())["observers"]
    assert summary["outcome"] != "done", first["mutants"]
    mutants = first["mutants"]
    assert mutants["ran"] and not mutants["ok"], mutants
    assert mutants["exit_code"] != 0 and "exited" in mutants["feedback"], mutants
