"""The pinned pytest check runs in safe-path mode, checked with real pytest runs.

Modules the model adds at the project root under the names pytest and its plugins import
while they start (`pytest.py`, `_pytest/`, `pluggy/`, `json.py`, `difflib.py`, the outcome
plugin's own name) each stop any interpreter that imports them; the pinned check's results
must be what they are without them. The project's tests must still import what
`python -m pytest` gave them (a module at the root, a `pythonpath = src` package), and
their own subprocesses must get the environment they would have had.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from test_pytest_pin import _commit

from looprun.checks.runner import run_observer
from looprun.observe.base import Observation
from looprun.template.loader import load_template

PY = sys.executable
BIN = Path(sys.executable).parent
OBSERVER = """\
looprun: 1
name: safepath
inputs: {intent: {type: string, required: true}}
act: {prompt: "x", tools: [read_file]}
observe:
  tests:
    run: "COMMAND -q -p no:cacheprovider -p looprun_outcome --junitxml=REPORT"
    pin_config: pytest
    parser: junit
    options: {outcome_channel: pytest}
    file: REPORT
exit: [tests.ok]
refine: [{else: retry}]
limits: {max_iterations: 2}
"""
PROJECT = {
    "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["src"]\ntestpaths = ["tests"]\n',
    "mymodule.py": "ANSWER = 42\n",
    "src/pkg/__init__.py": "VALUE = 1\n",
    # no __init__.py: prepend mode puts tests/ on the path, not the root
    "tests/test_project.py": (
        "import os\nimport subprocess\nimport sys\n\nimport mymodule\nimport pkg\n\n\n"
        "def test_root_module():\n    assert mymodule.ANSWER == 42\n\n\n"
        "def test_src_package():\n    assert pkg.VALUE == 1\n\n\n"
        "def test_a_child_gets_its_own_path():\n"
        "    assert 'PYTHONSAFEPATH' not in os.environ\n"
        "    code = 'import mymodule'\n"
        "    subprocess.run([sys.executable, '-c', code], check=True, cwd=os.getcwd())\n\n\n"
        "def test_fails():\n    assert mymodule.ANSWER == 41\n"
    ),
}
STOP = "raise SystemExit('imported from the project root')\n"
SHADOWS = {
    "pytest.py": STOP,
    "_pytest/__init__.py": STOP,
    "pluggy/__init__.py": STOP,
    "json.py": STOP,
    "difflib.py": STOP,
    "looprun_outcome.py": STOP,
}
EXPECTED = {"passed": 3, "failed": 1}
COMMANDS = {
    "python -m pytest": f"{PY} -m pytest",
    "coverage run -m pytest": f"COVERAGE_FILE=../.coverage {PY} -m coverage run -m pytest",
}


def _observe(tmp: Path, work: Path, base: str, command: str) -> Observation:
    report = tmp / "junit.xml"
    text = OBSERVER.replace("COMMAND", command).replace("REPORT", str(report))
    (tmp / "t.yaml").write_text(text)
    spec = load_template(tmp / "t.yaml").observe["tests"]
    return run_observer(
        spec,
        {},
        workdir=work,
        artifacts=tmp,
        base=base,
        git_dir=None,
        deadline=None,
        pinned=tmp / "pinned",
    )


def _counts(obs: Observation) -> dict[str, int]:
    facts = obs.to_facts()
    assert facts["consistent"], obs.feedback
    return {"passed": facts["passed"], "failed": facts["failed"]}


@pytest.mark.parametrize("runner", sorted(COMMANDS))
def test_root_modules_named_like_pytest_are_never_imported(tmp_path: Path, runner: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    base = _commit(work, PROJECT)
    assert _counts(_observe(tmp_path, work, base, COMMANDS[runner])) == EXPECTED

    for name, text in SHADOWS.items():
        (work / name).parent.mkdir(exist_ok=True)
        (work / name).write_text(text)
    # what the unpinned command would have run: the project's `pytest.py`
    plain = subprocess.run(
        [PY, "-m", "pytest", "-q"], cwd=work, capture_output=True, text=True, timeout=60
    )
    assert "imported from the project root" in plain.stderr, plain.stderr
    assert _counts(_observe(tmp_path, work, base, COMMANDS[runner])) == EXPECTED


def test_a_pytest_script_is_not_given_the_root(tmp_path: Path) -> None:
    """`pytest` run as a script never had the working directory on its path (its own
    directory instead): the pinned check does not add it."""
    work = tmp_path / "work"
    work.mkdir()
    base = _commit(work, PROJECT)
    obs = _observe(tmp_path, work, base, str(BIN / "pytest"))
    assert not obs.ok
    assert "No module named 'mymodule'" in obs.feedback, obs.feedback


def test_the_commands_own_pythonpath_is_kept(tmp_path: Path) -> None:
    """`-o pythonpath=src` in the command, no `pythonpath` at the base: the pinned `-o`
    that gives the root back comes later and carries `src` (from the root) along."""
    work = tmp_path / "work"
    work.mkdir()
    files = {k: v for k, v in PROJECT.items() if k != "pyproject.toml"}
    base = _commit(work, {**files, "pytest.ini": "[pytest]\ntestpaths = tests\n"})
    obs = _observe(tmp_path, work, base, f"{PY} -m pytest -o pythonpath=src")
    assert _counts(obs) == EXPECTED
