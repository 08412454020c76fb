"""Which runner the node pack reads, from package.json's test script as the run's base holds
it: node's runner, vitest or jest by the script's own words; mocha, an unknown command, two
runners or no script stop the run before any model call (exit 2) with how to choose; a
`--set runner=` choice wins; the TypeScript check is on where the base has a tsconfig.json
and the project's tsc is installed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from tests.support.git_repos import git, git_repo

from looprun.checks import stacks
from looprun.checks.stacks.base import SetupInput
from looprun.checks.stacks.node_setup import SETUP_READS, runner_of, settings
from looprun.errors import UsageError
from looprun.loop.plan import PlannedTask
from looprun.run.stack_setup import BaseFiles, with_stack_settings
from looprun.run.subloop_jobs import sub_inputs
from looprun.template import slots
from looprun.template.loader import load_template
from looprun.template.slots import StackChoice


@pytest.mark.parametrize(
    ("script", "runner"),
    [
        ("node --test", "node"),
        ("node --test test/", "node"),
        ("node --import tsx --test 'test/**/*.test.ts'", "node"),
        ("tsc -p . && node --test", "node"),
        ("vitest run", "vitest"),
        ("vitest", "vitest"),
        ("npx vitest run --coverage", "vitest"),
        ("jest", "jest"),
        ("jest --coverage", "jest"),
        ("NODE_ENV=test jest", "jest"),
        ("c8 --all node --test", "node"),
        ("cross-env NODE_ENV=test CI=1 jest --runInBand", "jest"),
        ("tsc --noEmit && jest", "jest"),
        ("node_modules/.bin/jest", "jest"),
        ("node --experimental-vm-modules node_modules/jest/bin/jest.js", "jest"),
    ],
)
def test_the_runner_comes_from_the_script_s_own_words(script: str, runner: str) -> None:
    assert runner_of(script) == runner


@pytest.mark.parametrize(
    ("script", "said"),
    [
        ("mocha test/", "runs mocha, whose results looprun cannot read"),
        ("nyc --reporter=lcov mocha", "runs mocha,"),
        ('echo "Error: no test specified" && exit 1', "runs no test runner looprun knows"),
        ("echo all tests passed", "runs no test runner looprun knows"),
        ("jest && vitest run", "more than one test runner (jest and vitest)"),
        ("node --test && jest", "more than one test runner (node and jest)"),
        ("jest --coverage && eslint .", "runs jest before another command"),
        ("npm run test:unit", "another package script"),
    ],
)
def test_a_script_looprun_cannot_read_is_a_usage_error_naming_it(script: str, said: str) -> None:
    with pytest.raises(UsageError) as caught:
        runner_of(script)
    text = str(caught.value)
    assert said in text and f'"{script}"' in text and "--set runner=" in text


def _at(read: dict[str, bytes], workdir: Path, **given: str) -> SetupInput:
    return SetupInput(
        read=read.get, workdir=workdir, given=given, declared=frozenset({"runner", "lint"})
    )


def _package(script: str | None) -> bytes:
    doc: dict[str, object] = {"name": "p", "version": "1.0.0"}
    if script is not None:
        doc["scripts"] = {"test": script}
    return json.dumps(doc).encode()


def test_no_script_no_package_json_and_bad_json_are_usage_errors(tmp_path: Path) -> None:
    for files, said in [
        ({"package.json": _package(None)}, "package.json has no scripts.test"),
        ({}, "no package.json at the repository's root"),
        ({"package.json": b'{\n  "scripts": {,\n}'}, "package.json:2:15: not valid JSON"),
    ]:
        with pytest.raises(UsageError) as caught:
            settings(_at(files, tmp_path))
        assert said in str(caught.value)


def test_set_runner_wins_and_a_wrong_name_is_refused(tmp_path: Path) -> None:
    files = {"package.json": _package("mocha")}
    (chosen,) = settings(_at(files, tmp_path, runner="jest"))
    assert (chosen.name, chosen.value) == ("runner", "jest")
    with pytest.raises(UsageError, match="--set runner=mocha: not a runner"):
        settings(_at(files, tmp_path, runner="mocha"))


def test_the_type_check_is_on_with_a_tsconfig_and_the_project_s_tsc(tmp_path: Path) -> None:
    files = {"package.json": _package("jest"), "tsconfig.json": b"{}"}
    without = {s.name: s for s in settings(_at(files, tmp_path))}
    assert without["lint"].value is None and "no node_modules/.bin/tsc" in without["lint"].why
    tsc = tmp_path / "node_modules" / ".bin" / "tsc"
    tsc.parent.mkdir(parents=True)
    tsc.write_text("#!/bin/sh\n")
    chosen = {s.name: s.value for s in settings(_at(files, tmp_path))}
    assert chosen == {"runner": "jest", "lint": "true"}
    given = {s.name: s.value for s in settings(_at(files, tmp_path, lint="false"))}
    assert given == {"runner": "jest", "lint": "false"}
    no_tsconfig = {"package.json": _package("jest")}
    assert [s.name for s in settings(_at(no_tsconfig, tmp_path))] == ["runner"]


def _pack_at(read: dict[str, bytes], workdir: Path, **given: str) -> dict[str, str | None]:
    """What setup chooses for the node pack's own inputs (runner, lint, typecheck, eslint)."""
    declared = frozenset({"runner", "lint", "typecheck", "eslint"})
    at = SetupInput(read=read.get, workdir=workdir, given=given, declared=declared)
    return {s.name: s.value for s in settings(at)}


def _tool(workdir: Path, name: str) -> None:
    path = workdir / "node_modules" / ".bin" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")


@pytest.mark.parametrize(
    "config",
    [
        {"eslint.config.js": b"module.exports = [];"},
        {"eslint.config.mjs": b"export default [];"},
        {".eslintrc.json": b"{}"},
        {".eslintrc": b"{}"},
        {"package.json": json.dumps({"scripts": {"test": "jest"}, "eslintConfig": {}}).encode()},
    ],
)
def test_eslint_is_on_where_the_base_configures_it_and_eslint_is_installed(
    config: dict[str, bytes], tmp_path: Path
) -> None:
    files = {"package.json": _package("jest"), **config}
    # configured but not installed: said, and off (no lint with nothing to run)
    at = SetupInput(
        read=files.get,
        workdir=tmp_path,
        given={},
        declared=frozenset({"runner", "lint", "typecheck", "eslint"}),
    )
    said = {s.name: s for s in settings(at)}
    assert said["eslint"].value is None and "no node_modules/.bin/eslint" in said["eslint"].why
    assert "lint" not in said
    _tool(tmp_path, "eslint")
    assert _pack_at(files, tmp_path) == {"runner": "jest", "eslint": "true", "lint": "true"}
    # --set eslint=false: nothing else to run, the check stays off
    assert _pack_at(files, tmp_path, eslint="false") == {"runner": "jest", "eslint": "false"}


def test_eslint_and_the_type_check_run_together_and_each_can_be_turned_off(
    tmp_path: Path,
) -> None:
    files = {"package.json": _package("jest"), "tsconfig.json": b"{}"}
    _tool(tmp_path, "eslint")
    _tool(tmp_path, "tsc")
    # eslint installed but not configured at the base: only the type check
    only_tsc = {"runner": "jest", "typecheck": "true", "lint": "true"}
    assert _pack_at(files, tmp_path) == only_tsc
    files["eslint.config.cjs"] = b"module.exports = [];"
    both = _pack_at(files, tmp_path)
    assert both == {"runner": "jest", "typecheck": "true", "eslint": "true", "lint": "true"}
    no_tsc = _pack_at(files, tmp_path, typecheck="false")
    assert (no_tsc["typecheck"], no_tsc["eslint"], no_tsc["lint"]) == ("false", "true", "true")
    assert _pack_at(files, tmp_path, lint="false")["lint"] == "false"


def test_files_are_read_as_the_base_holds_them(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "package.json").write_bytes(_package("jest"))
    (repo / ".gitignore").write_text("tsconfig.json\n")
    git_repo(repo)
    (repo / "tsconfig.json").write_text("{}")  # ignored and untracked: not in the base
    files = BaseFiles(repo)
    assert files.read("package.json") == _package("jest")
    assert files.read("tsconfig.json") is None
    assert files.read("missing.json") is None
    # uncommitted when the run starts: the base is HEAD plus the dirty tree
    (repo / "package.json").write_bytes(_package("vitest run"))
    assert BaseFiles(repo).read("package.json") == _package("vitest run")
    # a plain directory (no repository yet): as it is
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "package.json").write_bytes(_package("node --test"))
    assert BaseFiles(plain).read("package.json") == _package("node --test")


def test_the_chosen_runner_joins_the_run_s_sets(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "package.json").write_bytes(_package("jest"))
    git_repo(repo)
    with slots.chosen(StackChoice("node", "test")):
        template = load_template("bugfix")
    said: list[str] = []
    sets, chosen = with_stack_settings(template, repo, {"stack": "node"}, said.append)
    assert sets == {"stack": "node", "runner": "jest"} and chosen == {"runner": "jest"}
    assert said == ["runner: jest (package.json's test script at the run's base: \"jest\")"]
    # the user's choice wins, and is what the sub-loops get
    sets, chosen = with_stack_settings(template, repo, {"runner": "node"}, said.append)
    assert sets == {"runner": "node"} and chosen == {"runner": "node"}
    assert stacks.get("go").setup is None  # a stack without the hook reads nothing


def _cli(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("LOOPRUN_MODEL", None)
    return subprocess.run(
        [sys.executable, "-m", "looprun", "bugfix", "--intent", "x", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_cli_stops_on_an_unreadable_script_before_anything_starts(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "package.json").write_bytes(_package("mocha test/"))
    git_repo(repo)
    script = tmp_path / "script.yaml"
    script.write_text("- text: nothing\n")
    head = git("rev-parse", "HEAD", cwd=repo)
    done = _cli(repo, "--model", f"script:{script}")
    assert done.returncode == 2, done.stderr
    assert 'package.json\'s test script "mocha test/" runs mocha' in done.stderr
    assert "--set runner=" in done.stderr and "Traceback" not in done.stderr
    # nothing changed: no run, no state directory, the repository as it was
    assert not (repo / ".looprun").exists()
    assert git("status", "--porcelain", "--ignored", cwd=repo) == ""
    assert git("rev-parse", "HEAD", cwd=repo) == head


def test_a_feature_s_sub_loops_get_the_runner_the_run_read() -> None:
    with slots.chosen(StackChoice("node", "test")):
        feature = load_template("feature")
    assert feature.each_task is not None
    outer = SimpleNamespace(
        inputs={"intent": "add a thing", "runner": "jest"},
        invocation={"stack_inputs": {"runner": "jest", "lint": "true"}},
        run_info=SimpleNamespace(facts=dict),
    )
    task = PlannedTask(id="t1", goal="part one")
    inputs = sub_inputs(outer, feature.each_task, task)  # type: ignore[arg-type]
    assert (inputs["runner"], inputs["lint"]) == ("jest", True)
    # a run recorded before the stack read anything: the pack's defaults
    outer.invocation = {}
    assert sub_inputs(outer, feature.each_task, task)["runner"] == "node"  # type: ignore[arg-type]


def _counting_git(root: Path) -> Path:
    """A ``git`` first on the PATH that writes down its arguments, then runs the real one."""
    real = shutil.which("git")
    assert real is not None
    log = root / "git.log"
    shim = root / "bin" / "git"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{log}"\nexec "{real}" "$@"\n')
    shim.chmod(0o755)
    return log


def test_the_setup_s_files_are_read_together_as_each_alone_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "package.json").write_bytes(_package("jest"))
    (repo / ".gitignore").write_text("tsconfig.json\n")
    (repo / "eslint.config.js").write_text("committed")
    (repo / ".eslintrc.json").write_text("{}")
    (repo / "eslint.config.mjs").write_text("kept")
    git_repo(repo)
    (repo / "tsconfig.json").write_text("{}")  # ignored and untracked: not in the base
    (repo / "eslint.config.js").write_text("edited")  # dirty: the disk's
    (repo / "eslint.config.cjs").write_text("new")  # untracked: the disk's
    git("rm", "-q", "--cached", ".eslintrc.json", cwd=repo)  # staged deletion, still on disk
    git("mv", "eslint.config.mjs", "eslint.config.ts", cwd=repo)  # a staged rename
    (repo / ".eslintrc").mkdir()  # a directory by a config's name: no file
    (repo / ".eslintrc" / "x").write_text("x")
    names = (*SETUP_READS, "missing.json")
    one_by_one = {name: BaseFiles(repo).read(name) for name in names}
    assert one_by_one["eslint.config.js"] == b"edited"
    assert one_by_one["eslint.config.ts"] == b"kept" and one_by_one["eslint.config.mjs"] is None
    log = _counting_git(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    together = BaseFiles(repo)
    together.prefetch(names)
    assert {name: together.read(name) for name in names} == one_by_one
    calls = log.read_text().splitlines()
    # where each file alone asks git three or four times: one status and one batch in all
    assert sum(" status " in f" {c} " for c in calls) == 1, calls
    assert len(calls) <= 5, calls


def test_the_node_setup_asks_git_a_few_times_not_per_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "package.json").write_bytes(_package("node --test"))
    git_repo(repo)
    with slots.chosen(StackChoice("node", "test")):
        template = load_template("bugfix")
    log = _counting_git(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    sets, _ = with_stack_settings(template, repo, {}, lambda _: None)
    assert sets["runner"] == "node"
    calls = log.read_text().splitlines()
    assert len(calls) <= 6, calls
