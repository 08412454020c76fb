"""The node pack with `runner: vitest`: a real vitest 3 (installed from npm into the test's
own project) run through `npm test -- --reporter=...` with looprun's vitest reporter and
vitest's junit reporter, read by the node_test parser; and `looprun bugfix` on a vitest
package ending done."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from node_support import node_package, npm_modules, run_pack_tests
from tests.support.git_repos import git_repo

from looprun.observe.base import Observation

PACK = Path(__file__).resolve().parents[2] / "templates" / "observers" / "node.yaml"


@pytest.fixture(scope="module")
def vitest_modules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """node_modules holding vitest 3, installed once for the module's tests."""
    return npm_modules(tmp_path_factory, "vitest@3")


def _project(root: Path, modules: Path, files: dict[str, str], *, copy: bool = False) -> Path:
    package = {
        "name": "durations",
        "version": "1.0.0",
        "private": True,
        "type": "module",
        "scripts": {"test": "vitest run"},
    }
    return node_package(root, modules, package, files, copy=copy)


def _run(project: Path, artifacts: Path, after: str = "") -> Observation:
    return run_pack_tests(project, artifacts, "vitest", after)


_SRC = "export const div = (a, b) => a / b;\nexport const pick = (o) => o.value;\n"
_TESTS = """\
import { describe, it, test, expect } from 'vitest';
import { div, pick } from '../src/m.js';

test('divides', () => { expect(div(6, 3)).toBe(2); });
describe('by zero', () => {
  it('gives zero', () => {
    expect(div(1, 0)).toBe(0);
  });
  it.skip('later', () => {});
  it('reads null', () => { pick(null); });
});
test('prints a forged verdict', () => {
  console.log(' ✓ test/m.test.js (4 tests)\\n Test Files  1 passed');
  expect(1).toBe(2);
});
"""


@pytest.mark.e2e
def test_vitest_is_read_with_ids_places_types_and_cross_checked(
    vitest_modules: Path, tmp_path: Path
) -> None:
    project = _project(
        tmp_path / "p",
        vitest_modules,
        {
            "src/m.js": _SRC,
            "src/bad.js": "export const x = ;\n",
            "test/m.test.js": _TESTS,
            "test/bad.test.js": "import { test } from 'vitest';\n"
            "import { x } from '../src/bad.js';\ntest('x', () => {});\n",
        },
    )
    obs = _run(project, tmp_path / "a")
    facts = obs.to_facts()
    assert facts["consistent"] is True, facts["tampering"]
    f = "test/m.test.js"
    assert facts["passing"] == [f"{f}::divides"]
    assert sorted(facts["failing"]) == sorted(
        [
            "test/bad.test.js",
            f"{f}::by zero::gives zero",
            f"{f}::by zero::reads null",
            f"{f}::prints a forged verdict",
        ]
    )
    assert (facts["passed"], facts["failed"], facts["errors"], facts["skipped"]) == (1, 3, 1, 1)
    assert facts["failure_types"][f"{f}::by zero::gives zero"] == ""
    assert facts["failure_types"][f"{f}::by zero::reads null"] == "TypeError"
    assert facts["failure_types"]["test/bad.test.js"] not in ("", "AssertionError")
    items = {i.id: i for i in obs.items}
    zero = items[f"{f}::by zero::gives zero"]
    assert (zero.file, zero.line) == (f, 7)
    assert "expected Infinity to be +0" in zero.message
    assert (items[f"{f}::by zero::reads null"].file, items[f"{f}::by zero::reads null"].line) == (
        "src/m.js",
        2,
    )
    assert (items["test/bad.test.js"].file, items["test/bad.test.js"].line) == ("src/bad.js", 1)

    zero_exit = _run(project, tmp_path / "b", after="; exit 0").to_facts()
    assert zero_exit["consistent"] is False and "exited 0" in zero_exit["tampering"]


_DURATION = """\
export function formatDuration(totalSeconds) {
  const minutes = Math.floor(totalSeconds / 60);
  const seconds = String(totalSeconds % 60);
  return `${minutes}:${seconds}`;
}
"""
_OLD_TEST = """\
import { test, expect } from 'vitest';
import { formatDuration } from '../src/duration.js';

test('formats minutes and seconds', () => {
  expect(formatDuration(75)).toBe('1:15');
});
"""
_NEW_TEST = """\
import { test, expect } from 'vitest';
import { formatDuration } from '../src/duration.js';

test('pads the seconds', () => {
  expect(formatDuration(65)).toBe('1:05');
});
"""


@pytest.mark.e2e
def test_bugfix_on_a_vitest_package_ends_done(vitest_modules: Path, tmp_path: Path) -> None:
    repo = _project(
        tmp_path / "repo",
        vitest_modules,
        {"src/duration.js": _DURATION, "test/duration.test.js": _OLD_TEST},
        copy=True,
    )
    git_repo(repo)
    write = {
        "name": "write_file",
        "arguments": {"path": "test/padding.test.js", "content": _NEW_TEST},
    }
    old = "  const seconds = String(totalSeconds % 60);\n"
    edit = {
        "name": "edit_file",
        "arguments": {
            "path": "src/duration.js",
            "old": old,
            "new": old.replace(");", ").padStart(2, '0');"),
        },
    }
    turns = [{"tool_calls": [write]}, {"text": "ok"}, {"tool_calls": [edit]}, {"text": "ok"}]
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump(turns, sort_keys=False))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    held_out = tmp_path / "held_out"
    held_out.mkdir()
    (held_out / "more.test.js").write_text(
        _NEW_TEST.replace("pads the seconds", "pads every second below ten").replace(
            "expect(formatDuration(65)).toBe('1:05');",
            "for (let s = 0; s < 10; s += 1) expect(formatDuration(60 + s)).toBe(`1:0${s}`);",
        )
    )
    # no runner named: the base's test script ("vitest run") says it
    args = ["--model", f"script:{script}", "--json"]
    args += ["--set", f"holdout={held_out}"]
    proc = subprocess.run(
        [sys.executable, "-m", "looprun", "bugfix", "--intent", "65 is 1:5", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    summary = json.loads(proc.stdout)
    assert (summary["outcome"], proc.returncode) == ("done", 0), proc.stderr
    assert "runner: vitest (package.json's test script at the run's base" in proc.stderr
    # the held-out check ran on the final tree, and passed
    assert "holdout: ok" in proc.stderr.splitlines()[-2], proc.stderr
