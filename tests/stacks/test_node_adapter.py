"""The node adapter as the engine uses it: the pack and the adapter agree on what configures
the checks, a package.json marks the stack, and the clean check tree of a real npm project
runs the base's test script against an installed dependency linked read-only, whose change
mid-run is tampering."""

from __future__ import annotations

import json
from pathlib import Path

import jinja2
import pytest
import yaml
from tests.support.git_repos import git, git_repo
from tests.support.tools import require

from looprun.checks import stacks
from looprun.checks.clean_tree import CheckTrees
from looprun.checks.runner import observe_command
from looprun.checks.stacks.detect import detect
from looprun.observe.node_test import REPORTER

PACK = Path(__file__).resolve().parents[2] / "templates" / "observers" / "node.yaml"


def test_the_pack_protects_and_declares_what_the_adapter_pins() -> None:
    stack = stacks.get("node")
    pack = yaml.safe_load(PACK.read_text())
    assert pack["inputs"]["check_config"]["default"] == list(stack.pinned)
    assert pack["act"]["constraints"]["protect"]["paths"] == list(stack.pinned)
    assert pack["observe"]["tests"]["stack"] == "node"
    assert Path(stack.env["LOOPRUN_NODE_REPORTER"]) == REPORTER and REPORTER.is_file()
    # ESLint's configuration, flat and legacy, and its ignore file: the lint check's
    for config in ("**/eslint.config.*", "**/.eslintrc*", "**/.eslintignore"):
        assert config in stack.pinned
    assert Path(stack.env["LOOPRUN_NODE_LINT"]).is_file()


def test_a_package_json_at_the_root_is_the_node_stack(tmp_path: Path) -> None:
    (tmp_path / "package.json").write_text("{}")
    assert detect(tmp_path).name == "node"
    scripts = tmp_path / "only_sources"
    (scripts / "lib").mkdir(parents=True)
    (scripts / "lib" / "index.mjs").write_text("export const x = 1;\n")
    assert detect(scripts).name == "node"


def _npm_project(root: Path) -> Path:
    package = {
        "name": "app",
        "version": "1.0.0",
        "private": True,
        "scripts": {"test": "node --test"},
        "dependencies": {"shout": "1.0.0"},
    }
    (root / "test").mkdir(parents=True)
    (root / "package.json").write_text(json.dumps(package))
    (root / ".gitignore").write_text("node_modules/\ncoverage/\n")
    (root / "index.js").write_text("module.exports = (s) => require('shout')(s) + '?';\n")
    (root / "test" / "index.test.js").write_text(
        "const test = require('node:test');\nconst assert = require('node:assert');\n"
        "test('asks loudly', () => { assert.strictEqual(require('..')('hi'), 'HI!'); });\n"
    )
    dep = root / "node_modules" / "shout"
    dep.mkdir(parents=True)
    (dep / "package.json").write_text(json.dumps({"name": "shout", "version": "1.0.0"}))
    (dep / "index.js").write_text("module.exports = (s) => s.toUpperCase();\n")
    return git_repo(root)


@pytest.mark.e2e
def test_the_check_runs_the_base_script_with_node_modules_linked(tmp_path: Path) -> None:
    require("npm", "apt-get install nodejs npm")
    repo = _npm_project(tmp_path / "repo")
    base = git("rev-parse", "HEAD^{tree}", cwd=repo)
    # the working tree's script would pass anything; a planted coverage report and a
    # compiler state file are not the diff's to bring
    package = json.loads((repo / "package.json").read_text())
    package["scripts"]["test"] = "exit 0"
    (repo / "package.json").write_text(json.dumps(package))
    (repo / "coverage").mkdir()
    (repo / "coverage" / "lcov.info").write_text("TN:\n")
    (repo / "app.tsbuildinfo").write_text("{}")
    trees = CheckTrees(tmp_path / "checks")
    root, env, tampered = trees.prepare("node", workdir=repo, git_dir=None, base=base)
    assert tampered == ""
    assert json.loads((root / "package.json").read_text())["scripts"]["test"] == "node --test"
    assert not (root / "coverage").exists() and not (root / "app.tsbuildinfo").exists()
    assert (root / "node_modules").is_symlink()
    cache = Path(env["npm_config_cache"])
    assert tmp_path / "checks" in cache.parents and root not in cache.parents

    pack = yaml.safe_load(PACK.read_text())["observe"]["tests"]
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    inputs = {"test_command": "npm test", "runner": "node"}
    command = jinja2.Template(pack["run"]).render(run={"artifacts": artifacts}, inputs=inputs)
    obs = observe_command(
        "node_test",
        workdir=root,
        command=command,
        file=artifacts / "node-tests.jsonl",
        extra_env=env,
        timeout_s=120,
    )
    facts = obs.to_facts()
    # the base's `node --test` ran, with the dependency from node_modules: the honest
    # verdict (`HI?` is not `HI!`), not the working tree's `exit 0`
    assert facts["failing"] == ["test/index.test.js::asks loudly"], obs.feedback
    assert facts["consistent"] is True and obs.ok is False
    assert "'HI?' !== 'HI!'" in obs.feedback

    # a dependency changed mid-run: the check's verdict cannot be trusted
    (repo / "node_modules" / "shout" / "index.js").write_text(
        "module.exports = (s) => s.toUpperCase() + '!';\n"
    )
    _root, _env, tampered = trees.prepare("node", workdir=repo, git_dir=None, base=base)
    assert "node_modules changed during the run" in tampered
