"""Shared by the node stack's tests: a runner installed from npm once (a skip locally, a
failure in CI), a package using it, and the pack's `tests` command run on it as the engine
renders it."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml
from tests.support.tools import require

from looprun.checks import stacks
from looprun.checks.runner import observe_command
from looprun.observe.base import Observation

PACK = Path(__file__).resolve().parents[2] / "templates" / "observers" / "node.yaml"
DURATIONS = Path(__file__).resolve().parents[2] / "samples" / "node_durations"
INTENT = (DURATIONS / "intent.txt").read_text(encoding="utf-8").strip()


def npm_modules(tmp_path_factory: pytest.TempPathFactory, *packages: str) -> Path:
    """node_modules holding ``packages`` (``jest@29``), installed from the npm registry
    once per test session: the parallel workers share one install per set of packages
    (the first to take its lock installs, the others wait and reuse it)."""
    require("npm", "apt-get install nodejs npm")
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the session's, above each worker's own
    root = shared / ("npm-" + "-".join(p.replace("/", "_").replace("@", "") for p in packages))
    root.mkdir(exist_ok=True)
    with open(shared / f"{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / "installed").exists():
            _install(root, packages)
    return root / "node_modules"


def _install(root: Path, packages: tuple[str, ...]) -> None:
    (root / "package.json").write_text(json.dumps({"name": "m", "version": "1.0.0"}))
    done = subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", *packages],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"npm install {' '.join(packages)} failed: {done.stderr[-500:]}")
        pytest.skip(f"{' '.join(packages)} could not be installed from the npm registry")
    (root / "installed").write_text("")


def node_package(
    root: Path,
    modules: Path,
    package: dict[str, Any],
    files: dict[str, str],
    *,
    copy: bool = False,
) -> Path:
    """A package (its package.json ``package``, its ``files``); node_modules a link to the
    installed one, or (``copy``) a real directory of hard links, as the check tree links
    only a real one."""
    root.mkdir(parents=True)
    (root / "package.json").write_text(json.dumps(package))
    (root / ".gitignore").write_text("node_modules/\n")
    if copy:
        shutil.copytree(modules, root / "node_modules", symlinks=True, copy_function=os.link)
    else:
        (root / "node_modules").symlink_to(modules, target_is_directory=True)
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def run_pack_tests(project: Path, artifacts: Path, runner: str, after: str = "") -> Observation:
    """The pack's `tests` command for ``runner``, rendered as the engine renders it, with
    the environment the node adapter gives every check."""
    artifacts.mkdir()
    run = yaml.safe_load(PACK.read_text())["observe"]["tests"]["run"]
    inputs = {"test_command": "npm test", "runner": runner}
    command = jinja2.Template(run).render(run={"artifacts": artifacts}, inputs=inputs)
    return observe_command(
        "node_test",
        workdir=project,
        command=command + after,
        file=artifacts / "node-tests.jsonl",
        extra_env=stacks.get("node").env,
        timeout_s=180,
    )


def run_pack_lint(
    project: Path, artifacts: Path, *, typecheck: bool, eslint: bool, timeout_s: int = 120
) -> Observation:
    """The pack's `lint` observer on ``project``, its command rendered as the engine renders
    it (with the default tool commands), read by its parser with the adapter's environment."""
    artifacts.mkdir(exist_ok=True)
    pack = yaml.safe_load(PACK.read_text())
    spec = pack["observe"]["lint"]
    inputs = {k: v["default"] for k, v in pack["inputs"].items()}
    inputs.update(typecheck=typecheck, eslint=eslint)
    command = jinja2.Template(spec["run"]).render(run={"artifacts": artifacts}, inputs=inputs)
    return observe_command(
        spec["parser"],
        workdir=project,
        command=command,
        file=artifacts / "lint.sarif",
        extra_env=stacks.get("node").env,
        timeout_s=timeout_s,
    )


def bugfix(tmp: Path, repo: Path, turns: list[dict[str, Any]], *extra: str) -> dict[str, Any]:
    """`looprun bugfix --json` in ``repo`` (its cwd) on the durations bug, with ``turns`` as
    the scripted model (its script in ``tmp``): the summary, with ``exit`` and ``stderr``."""
    script = tmp / "script.yaml"
    script.write_text(yaml.safe_dump(turns, sort_keys=False))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("LOOPRUN_MODEL", None)
    model = ["--model", f"script:{script}", "--json"]
    proc = subprocess.run(
        [sys.executable, "-m", "looprun", "bugfix", "--intent", INTENT, *model, *extra],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.stdout.strip(), proc.stderr
    return {**json.loads(proc.stdout), "exit": proc.returncode, "stderr": proc.stderr}


def events(summary: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    """The run's journal events of ``kind``."""
    lines = (Path(summary["run_dir"]) / "journal.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e.get("event") == kind]
