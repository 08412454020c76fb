"""Pinning pytest's configuration to the base, checked against real pytest.

Which file wins is compared with what pytest itself reports (`rootdir:` and `configfile:`
in its header) on the same tree; the pinned command is compared with pytest run on the
base as it is (collected ids, conftest fixtures from the root, `testpaths`, `pythonpath`,
`python_files`), and then again after the tree gained or changed configuration files.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from looprun.checks.pytest_pin import BaseTree, PinError, command_args, locate, pin
from looprun.checks.runner import observe_command, run_observer
from looprun.observe.base import Observation
from looprun.template.loader import load_template
from looprun.workspace.git import Git

PYTEST = f"{sys.executable} -m pytest -p no:cacheprovider"


def _commit(work: Path, files: dict[str, str]) -> str:
    for name, text in files.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=work,
            check=True,
            capture_output=True,
        )
    return Git(work).run("rev-parse", "HEAD").strip()


def _pytest_says(work: Path, args: list[str]) -> tuple[Path, str | None]:
    """The rootdir and configuration file real pytest picks for ``args`` in ``work``."""
    proc = subprocess.run(
        [*PYTEST.split(), "--co", *args], cwd=work, capture_output=True, text=True, timeout=60
    )
    header = proc.stdout + proc.stderr
    root = re.search(r"^rootdir: (.+?)(?:, |$)", header, re.M)
    config = re.search(r"configfile: (\S+)", header, re.M)
    assert root, header
    rootdir = Path(root.group(1))
    return rootdir, None if config is None else str((rootdir / config.group(1)).resolve())


INI = "[pytest]\naddopts = -ra\n"
LAYOUTS: dict[str, tuple[dict[str, str], list[str]]] = {
    "pytest.toml before pytest.ini": (
        {"pytest.toml": '[pytest]\naddopts = ["-ra"]\n', "pytest.ini": INI},
        [],
    ),
    ".pytest.toml before .pytest.ini": (
        {".pytest.toml": "[pytest]\n", ".pytest.ini": INI, "pyproject.toml": ""},
        [],
    ),
    "pytest.ini before pyproject.toml": (
        {"pytest.ini": "", "pyproject.toml": "[tool.pytest.ini_options]\naddopts = '-ra'\n"},
        [],
    ),
    "pyproject.toml [tool.pytest] before tox.ini": (
        {"pyproject.toml": "[tool.pytest]\naddopts = ['-ra']\n", "tox.ini": INI},
        [],
    ),
    "tox.ini without [pytest] is skipped for setup.cfg": (
        {
            "tox.ini": "[tox]\nenvlist = py\n",
            "setup.cfg": "[metadata]\nname = x\n  continued\n[tool:pytest]\naddopts = -ra\n",
        },
        [],
    ),
    "a pyproject.toml without pytest's table is the fallback": (
        {"pyproject.toml": "[project]\nname = 'x'\n", "setup.cfg": "[flake8]\n", "a/t.py": ""},
        ["a"],
    ),
    "the arguments' directory is searched first": (
        {"pytest.ini": INI, "tests/.pytest.ini": INI, "tests/test_x.py": ""},
        ["tests"],
    ),
    "without arguments the working directory is": (
        {"pytest.ini": INI, "tests/pytest.ini": INI, "tests/test_x.py": ""},
        [],
    ),
    "a node id names its file": (
        {"tests/tox.ini": INI, "tests/test_x.py": "def test_a():\n    pass\n"},
        ["tests/test_x.py::test_a", "-k", "a"],
    ),
    "the common ancestor of two arguments": (
        {"tests/setup.cfg": "[tool:pytest]\n", "tests/a/t.py": "", "tests/b/t.py": ""},
        ["tests/a", "tests/b/t.py"],
    ),
    "setup.py makes the rootdir when nothing configures pytest": (
        {"setup.py": "", "tests/t.py": ""},
        ["tests"],
    ),
    "then each argument is searched on its own": (
        {"a/tox.ini": INI, "a/t.py": "", "b/t.py": ""},
        ["a/t.py", "b/t.py"],
    ),
    "nothing at all": ({"tests/t.py": ""}, ["tests"]),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_the_file_pytest_picks_is_the_one_pinned(tmp_path: Path, layout: str) -> None:
    files, args = LAYOUTS[layout]
    work = tmp_path / "work"
    work.mkdir()
    base = _commit(work, files)
    rootdir, configfile = _pytest_says(work, args)

    found = locate(
        BaseTree(work, Git(work), base), work, command_args(f"{PYTEST} {' '.join(args)}")[0], None
    )
    assert found.rootdir == rootdir
    pinned = None if not found.source else str((work / found.source).resolve())
    assert pinned == configfile
    if configfile is not None:
        assert found.content == Path(configfile).read_bytes()


def test_the_base_is_read_from_git_not_from_the_tree(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    base = _commit(work, {"tox.ini": "[tox]\n", "tests/t.py": ""})
    (work / "tox.ini").write_text("[pytest]\naddopts = -p cheat\n")
    (work / "tests" / "pytest.ini").write_text("[pytest]\naddopts = -p cheat\n")

    found = locate(BaseTree(work, Git(work), base), work, ["tests"], None)
    assert (found.rootdir, found.source, found.content) == (work, "", b"")


# a project whose check depends on every part of its configuration
PROJECT = {
    "pyproject.toml": (
        "[tool.pytest.ini_options]\n"
        "testpaths = ['tests']\n"
        "python_files = ['check_*.py']\n"
        "pythonpath = ['src']\n"
        "markers = ['slow']\n"
    ),
    "src/mylib.py": "def answer():\n    return 42\n",
    "conftest.py": "import pytest\n\n\n@pytest.fixture\ndef root():\n    return 'root'\n",
    "tests/conftest.py": "import pytest\n\n\n@pytest.fixture\ndef inner():\n    return 1\n",
    "tests/check_lib.py": (
        "import mylib\n\n\n"
        "def test_answer(root, inner):\n"
        "    assert (mylib.answer(), root, inner) == (42, 'root', 1)\n\n\n"
        "def test_bug():\n"
        "    assert mylib.answer() == 43\n"
    ),
    "tests/test_not_collected.py": "def test_never():\n    assert False\n",
}


def _results(work: Path, command: str) -> dict[str, str]:
    report = work.parent / "junit.xml"
    subprocess.run(
        f"{command} --junitxml={report}", shell=True, cwd=work, capture_output=True, timeout=120
    )
    out = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        failed = case.find("failure") is not None or case.find("error") is not None
        out[f"{case.get('classname')}::{case.get('name')}"] = "failed" if failed else "passed"
    return out


def test_the_pinned_command_runs_the_check_the_base_configures(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    base = _commit(work, PROJECT)
    # a conftest above the working tree: pytest's default cut-off (the rootdir) skips it
    (tmp_path / "conftest.py").write_text("raise SystemExit('loaded from above')\n")
    expected = {"tests.check_lib::test_answer": "passed", "tests.check_lib::test_bug": "failed"}
    assert _results(work, PYTEST) == expected

    into = work / ".looprun" / "runs" / "r" / "pinned" / "tests"
    pinned = pin(PYTEST, workdir=work, git_dir=None, base=base, into=into)
    assert (into / "pyproject.toml").read_bytes() == (work / "pyproject.toml").read_bytes()
    assert _results(work, pinned) == expected

    # what the model writes afterwards: each would change what the check runs
    (work / "pyproject.toml").write_text("[tool.pytest.ini_options]\naddopts = '-k answer'\n")
    (work / "pytest.ini").write_text("[pytest]\npython_files = test_*.py\n")
    (work / "tests" / "pytest.toml").write_text('[pytest]\naddopts = ["-k", "answer"]\n')
    assert _results(work, pinned) == expected
    assert pin(PYTEST, workdir=work, git_dir=None, base=base, into=into) == pinned
    assert _results(work, PYTEST) != expected  # what the unpinned command would have run


def test_with_no_configuration_at_the_base_an_added_one_is_not_read(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    base = _commit(work, {"test_x.py": "def test_bug():\n    assert False\n"})
    (work / "pytest.ini").write_text("[pytest]\naddopts = -k nothing\n")
    into = tmp_path / "pinned"
    pinned = pin(PYTEST, workdir=work, git_dir=None, base=base, into=into)

    assert (into / "pytest.ini").read_bytes() == b""
    assert _results(work, pinned) == {"test_x::test_bug": "failed"}


def test_a_planted_copy_or_link_in_the_pin_directory_is_never_used(tmp_path: Path) -> None:
    # with the sandbox off a command can write the run directory: each check rewrites the
    # copy from the base, replacing a planted file and never writing through a link
    work = tmp_path / "work"
    work.mkdir()
    base = _commit(work, {"pytest.ini": INI, "test_x.py": "def test_bug():\n    assert False\n"})
    into = tmp_path / "pinned"
    pin(PYTEST, workdir=work, git_dir=None, base=base, into=into)
    (into / "pytest.ini").write_text("[pytest]\naddopts = -k nothing\n")
    pinned = pin(PYTEST, workdir=work, git_dir=None, base=base, into=into)
    assert (into / "pytest.ini").read_text() == INI
    assert _results(work, pinned) == {"test_x::test_bug": "failed"}

    victim = tmp_path / "victim.ini"
    victim.write_text("[pytest]\naddopts = -k nothing\n")
    (into / "pytest.ini").unlink()
    (into / "pytest.ini").symlink_to(victim)
    pinned = pin(PYTEST, workdir=work, git_dir=None, base=base, into=into)
    assert victim.read_text() == "[pytest]\naddopts = -k nothing\n"  # not written through
    assert not (into / "pytest.ini").is_symlink() and (into / "pytest.ini").read_text() == INI
    assert _results(work, pinned) == {"test_x::test_bug": "failed"}


@pytest.mark.parametrize(
    ("command", "said"),
    [
        ("make test", "runs no pytest"),
        (f"{PYTEST} tests; echo ok", "goes on after pytest's arguments"),
        (f"{PYTEST} 'tests", "cannot read the command's arguments"),
        (f"{PYTEST} -c ci/missing.ini", "-c ci/missing.ini: no such regular file at the base"),
    ],
)
def test_a_command_that_cannot_be_pinned_is_refused(
    tmp_path: Path, command: str, said: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    base = _commit(work, {"tests/test_x.py": ""})
    with pytest.raises(PinError, match=re.escape(said)):
        pin(command, workdir=work, git_dir=None, base=base, into=tmp_path / "pinned")
    assert not (tmp_path / "pinned").exists()  # nothing written


def test_command_args_skip_option_values() -> None:
    command = (
        "COVERAGE_FILE=/a/pytest PYTHONDONTWRITEBYTECODE=1 python -m coverage run -m pytest "
        "-q -k 'a or b' -p looprun_outcome --junitxml=/r/pytest tests/unit tests/x.py::t -c c.ini"
    )
    assert command_args(command) == (["tests/unit", "tests/x.py"], "c.ini", None)
    assert command_args("pytest --rootdir=. --config-file=ci.toml") == ([], "ci.toml", ".")


def test_a_command_that_replaces_pythonpath_loses_the_plugin_and_fails(tmp_path: Path) -> None:
    """The outcome plugin comes in on PYTHONPATH: a test command that overwrites it makes
    `-p looprun_outcome` unimportable, and the check is not ok (pytest's usage error, 4,
    which the Python pack declares as `cannot_run_exit`), never a pass."""
    (tmp_path / "test_x.py").write_text("def test_ok():\n    assert True\n")
    report = tmp_path / "junit.xml"
    obs = observe_command(
        "junit",
        workdir=tmp_path,
        command=f"PYTHONPATH=src {PYTEST} -p looprun_outcome --junitxml={report}",
        file=report,
        options={"outcome_channel": "pytest"},
        timeout_s=120,
    )
    assert (obs.ok, obs.exit_code) == (False, 4)
    assert obs.to_facts()["passed"] == 0


def test_a_working_tree_inside_the_repository_reads_its_own_directory(tmp_path: Path) -> None:
    base = _commit(tmp_path, {"pytest.ini": INI, "w/tests/pytest.ini": INI, "w/tests/t.py": ""})
    work = tmp_path / "w"
    rootdir, configfile = _pytest_says(work, ["tests"])

    found = locate(BaseTree(work, Git(work), base), work, ["tests"], None)
    assert (found.rootdir, str(work / found.source)) == (rootdir, configfile)


OBSERVER = """\
looprun: 1
name: pinned
inputs: {intent: {type: string, required: true}}
act: {prompt: "x", tools: [read_file]}
observe:
  check: {run: "PYTHON -m pytest -q -p no:cacheprovider", pin_config: pytest, parser: exit_code}
exit: [check.ok]
refine: [{else: retry}]
limits: {max_iterations: 2}
"""


def test_a_pinned_observer_runs_pinned_and_without_the_user_site(tmp_path: Path) -> None:
    """Through the loop's own entry point: the added pytest.ini would deselect the test
    (`-k nothing`, exit 5); pinned, the test runs and sees no user site directory."""
    work = tmp_path / "work"
    work.mkdir()
    test = "import site\n\n\ndef test_no_user_site():\n    assert not site.ENABLE_USER_SITE\n"
    base = _commit(work, {"test_site.py": test})
    (work / "pytest.ini").write_text("[pytest]\naddopts = -k nothing\n")
    (tmp_path / "t.yaml").write_text(OBSERVER.replace("PYTHON", sys.executable))
    spec = load_template(tmp_path / "t.yaml").observe["check"]

    def observe(pinned: Path | None) -> Observation:
        return run_observer(
            spec,
            {},
            workdir=work,
            artifacts=tmp_path,
            base=base,
            git_dir=None,
            deadline=None,
            pinned=pinned,
        )

    assert observe(tmp_path / "pinned").exit_code == 0
    assert (tmp_path / "pinned" / "check" / "pytest.ini").read_bytes() == b""
    unpinned = observe(None)  # no directory to pin into: refused, not run unpinned
    assert (unpinned.ok, unpinned.exit_code) == (False, None)
    assert "no run directory to keep the pinned configuration in" in (unpinned.error or "")


def test_each_check_after_the_first_pins_without_asking_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the base commit never changes: what configures pytest there is read once per
    # command line, and each check still gets the copy written anew
    work = tmp_path / "work"
    work.mkdir()
    base = _commit(work, {"pytest.ini": INI, "test_x.py": "def test_bug():\n    assert False\n"})
    log, shim = tmp_path / "git.log", tmp_path / "bin" / "git"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "{shutil.which("git")}" "$@"\n')
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim.parent}{os.pathsep}{os.environ['PATH']}")
    into = tmp_path / "pinned"
    first = pin(PYTEST, workdir=work, git_dir=None, base=base, into=into)
    asked = log.read_text().splitlines()
    assert asked  # the base was read through git once
    (into / "pytest.ini").write_text("[pytest]\naddopts = -k nothing\n")
    assert pin(PYTEST, workdir=work, git_dir=None, base=base, into=into) == first
    assert log.read_text().splitlines() == asked
    assert (into / "pytest.ini").read_text() == INI
