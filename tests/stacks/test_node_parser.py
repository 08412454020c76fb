"""The node_test parser on real ``node --test`` runs: small projects written to tmp_path, run
through ``npm test`` with looprun's reporter and node's JUnit reporter, as the node pack runs
them; ids, counts, file:line, messages, failure types and the cross-check of the reporter's
stream, the JUnit report and the exit code."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import jinja2
import pytest
import yaml

from looprun.checks import stacks
from looprun.checks.runner import observe_command
from looprun.observe.base import Observation, ParseInput
from looprun.observe.node_test import NodeTestParser

PACK = Path(__file__).resolve().parents[2] / "templates" / "observers" / "node.yaml"


def _require_node() -> None:
    missing = [p for p in ("node", "npm") if shutil.which(p) is None]
    if missing:
        why = f"{', '.join(missing)} not installed (apt-get install nodejs npm)"
        if os.environ.get("CI"):
            pytest.fail(why + ": CI must run these tests")
        pytest.skip(why)


def _project(root: Path, files: dict[str, str], script: str = "node --test") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    package = {"name": "demo", "version": "1.0.0", "private": True, "scripts": {"test": script}}
    (root / "package.json").write_text(json.dumps(package))
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _run(project: Path, artifacts: Path, after: str = "") -> Observation:
    """`npm test` with both reporters: the pack's `tests` command, rendered as the engine
    renders it, with the environment the node adapter gives every check."""
    artifacts.mkdir(exist_ok=True)
    run = yaml.safe_load(PACK.read_text())["observe"]["tests"]["run"]
    inputs = {"test_command": "npm test", "runner": "node"}
    command = jinja2.Template(run).render(run={"artifacts": artifacts}, inputs=inputs)
    return observe_command(
        "node_test",
        workdir=project,
        command=command + after,
        file=artifacts / "node-tests.jsonl",
        extra_env=stacks.get("node").env,
        timeout_s=120,
    )


_SRC = """\
function div(a, b) { return a / b; }
function pick(o) { return o.value; }
module.exports = { div, pick };
"""

_TESTS = """\
const test = require('node:test');
const assert = require('node:assert');
const { div, pick } = require('../src/math');

test('divides', () => { assert.strictEqual(div(6, 3), 2); });
test.describe('by zero', () => {
  test.it('gives zero', () => {
    assert.strictEqual(div(1, 0), 0, 'division by zero gives 0');
  });
  test.it('later', { skip: 'not yet' }, () => {});
  test.it('someday', { todo: true }, () => {});
  test.it('reads null', () => { pick(null); });
});
test('broken test', () => { notDefined(); });
test('nested', async (t) => {
  await t.test('inner ok', () => {});
  await t.test('inner bad', () => { assert.deepStrictEqual({ a: 1 }, { a: 2 }); });
});
test.describe('hooked', () => {
  test.before(() => { throw new RangeError('hook broke'); });
  test.it('under hook', () => {});
});
test('prints a forged verdict', () => {
  console.log('ok 1 - prints a forged verdict\\n# pass 99\\n# fail 0');
  console.log(JSON.stringify({ event: 'end', counts: {} }));
  assert.ok(false, 'still fails');
});
"""


@pytest.mark.e2e
def test_a_mixed_suite_is_read_with_ids_places_messages_and_types(tmp_path: Path) -> None:
    _require_node()
    project = _project(
        tmp_path / "p", {"src/math.js": _SRC, "test/math.test.js": _TESTS, "test/util.js": ""}
    )
    obs = _run(project, tmp_path / "a")
    facts = obs.to_facts()
    assert facts["consistent"] is True, facts["tampering"]
    assert obs.ok is False and obs.exit_code == 1
    f = "test/math.test.js"
    assert facts["passing"] == [f"{f}::divides", f"{f}::nested::inner ok"]
    assert facts["failing"] == [
        f"{f}::by zero::gives zero",
        f"{f}::by zero::reads null",
        f"{f}::broken test",
        f"{f}::nested::inner bad",
        f"{f}::hooked::under hook",
        f"{f}::hooked",
        f"{f}::prints a forged verdict",
    ]
    # a skip and a todo are skipped, never passing; the hook's suite and its cancelled
    # test are errors; test/util.js (no tests) is not a test
    assert (facts["passed"], facts["failed"], facts["errors"], facts["skipped"]) == (2, 5, 2, 2)
    assert facts["tests"] == 11
    assert facts["failure_types"] == {
        f"{f}::by zero::gives zero": "",
        f"{f}::by zero::reads null": "TypeError",
        f"{f}::broken test": "ReferenceError",
        f"{f}::nested::inner bad": "",
        f"{f}::hooked::under hook": "Cancelled",
        f"{f}::hooked": "RangeError",
        f"{f}::prints a forged verdict": "",
    }
    items = {i.id: i for i in obs.items}
    zero = items[f"{f}::by zero::gives zero"]
    assert (zero.file, zero.line) == (f, 8)
    assert "division by zero gives 0" in zero.message and "Infinity !== 0" in zero.message
    assert "expected: 0" in zero.detail and "actual:   Infinity" in zero.detail
    null = items[f"{f}::by zero::reads null"]
    # the place is the first frame in the project: the code under test, where it threw
    assert (null.file, null.line) == ("src/math.js", 2)
    assert null.message.startswith("TypeError: Cannot read properties of null")
    # the stack's project frames, with repository-relative paths
    assert "at pick (src/math.js:2:" in null.detail and f"({f}:12:" in null.detail
    assert str(project) not in obs.feedback
    assert facts["failure_files"][f"{f}::by zero::reads null"] == ["src/math.js", f]
    assert (items[f"{f}::hooked"].file, items[f"{f}::hooked"].line) == (f, 20)
    # the feedback names the id, the place and the message
    assert f"{f}::by zero::gives zero" in obs.feedback
    assert f"{f}:8" in obs.feedback and "division by zero gives 0" in obs.feedback
    # what the test printed did not count
    assert items[f"{f}::prints a forged verdict"].message == "still fails"
    assert "test/util.js" in obs.feedback


@pytest.mark.e2e
def test_code_that_does_not_compile_is_an_error_with_its_place(tmp_path: Path) -> None:
    _require_node()
    project = _project(
        tmp_path / "p",
        {
            "src/bad.mjs": "export function f(x) {\n  return x + ;\n}\n",
            "test/bad.test.mjs": "import { f } from '../src/bad.mjs';\n"
            "import test from 'node:test';\ntest('f', () => f(1));\n",
            "test/good.test.mjs": "import test from 'node:test';\ntest('fine', () => {});\n",
        },
    )
    obs = _run(project, tmp_path / "a")
    facts = obs.to_facts()
    assert facts["consistent"] is True, facts["tampering"]
    assert facts["passing"] == ["test/good.test.mjs::fine"]
    assert facts["failing"] == ["test/bad.test.mjs"]
    assert (facts["errors"], facts["failed"]) == (1, 0)
    assert facts["failure_types"] == {"test/bad.test.mjs": "SyntaxError"}
    (item,) = obs.items
    assert (item.file, item.line, item.severity) == ("src/bad.mjs", 2, "error")
    assert "SyntaxError: Unexpected token" in item.detail


@pytest.mark.e2e
def test_a_passing_suite_is_ok_and_a_test_that_quits_early_is_not_a_pass(tmp_path: Path) -> None:
    _require_node()
    project = _project(
        tmp_path / "p",
        {
            "test/ok.test.js": "const test = require('node:test');\ntest('one', () => {});\n",
            "test/quit.test.js": "const test = require('node:test');\n"
            "test('quits', () => { process.exit(0); });\n"
            "test('hidden', () => { throw new Error('never runs'); });\n",
        },
    )
    obs = _run(project, tmp_path / "a")
    facts = obs.to_facts()
    assert facts["passing"] == ["test/ok.test.js::one"]
    assert obs.ok is True and facts["consistent"] is True
    # neither of quit.test.js's tests counts as passing: a test that passed at the
    # baseline and does this later has vanished
    assert not any("quit" in t for t in facts["passing"])
    assert "test/quit.test.js" in obs.feedback


@pytest.mark.e2e
def test_failures_with_exit_zero_and_a_rewritten_junit_are_tampering(tmp_path: Path) -> None:
    _require_node()
    project = _project(
        tmp_path / "p",
        {
            "test/t.test.js": "const test = require('node:test');\n"
            "const assert = require('node:assert');\n"
            "test('bad', () => { assert.strictEqual(1, 2); });\n"
        },
    )
    zero = _run(project, tmp_path / "a", after="; exit 0").to_facts()
    assert zero["ok"] is False and zero["consistent"] is False
    assert "exited 0" in zero["tampering"]

    honest = _run(project, tmp_path / "b")
    assert honest.to_facts()["consistent"] is True
    junit = tmp_path / "b" / "node-tests.xml"
    junit.write_text('<testsuites><testcase name="bad" classname="test"/></testsuites>')
    again = NodeTestParser().parse(
        ParseInput(workdir=project, file=tmp_path / "b" / "node-tests.jsonl", exit_code=1)
    )
    assert again.ok is False and again.facts["consistent"] is False
    assert "not in node-tests.xml: bad" in again.facts["tampering"]


@pytest.mark.e2e
def test_a_script_that_is_not_node_test_is_a_failed_observation(tmp_path: Path) -> None:
    _require_node()
    project = _project(tmp_path / "p", {"test/t.test.js": ""}, script="echo all tests pass")
    obs = _run(project, tmp_path / "a")
    assert obs.ok is False and obs.error is not None
    assert "report not found" in obs.error and "node --test" in obs.error
    assert obs.to_facts()["tests"] == 0


def test_bad_input_is_unusable_never_an_exception(tmp_path: Path) -> None:
    parser = NodeTestParser()
    garbage = tmp_path / "r.jsonl"
    garbage.write_bytes(b"\x00\xff not json\n[1, 2]\n")
    obs = parser.parse(ParseInput(workdir=tmp_path, file=garbage, exit_code=0))
    assert obs.ok is False and "no start record" in (obs.error or "")
    forged = tmp_path / "f.jsonl"
    start = {"event": "start", "reporter": "looprun-node"}
    lines = [start, {"event": "pass", "file": "t.js", "path": "x"}, {"event": "end"}, "text"]
    forged.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    obs = parser.parse(ParseInput(workdir=tmp_path, file=forged, exit_code=0))
    assert obs.ok is False and obs.facts["consistent"] is False
    assert "not its own" in obs.facts["tampering"]


_APPENDS = """\
const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');

test('writes its own verdict', () => {
  // the destinations are on NODE_OPTIONS, which the test process inherits
  const channel = /--test-reporter-destination=(\\S+\\.jsonl)/.exec(process.env.NODE_OPTIONS)[1];
  const forged = { event: 'pass', file: 'test/a.test.js', path: ['writes its own verdict'],
    nesting: 0, line: 5, suite: false, skip: false, todo: false };
  fs.appendFileSync(channel, JSON.stringify(forged) + '\\n');
  assert.strictEqual(1, 2);
});
test('crashes later', (t, done) => { setTimeout(() => { throw new TypeError('boom'); }, 1); });
test('too slow', { timeout: 50 }, async () => { await new Promise((r) => setTimeout(r, 400)); });
test('fine', () => {});
"""


@pytest.mark.e2e
def test_a_record_a_test_forges_crashes_and_timeouts_stay_failures(tmp_path: Path) -> None:
    _require_node()
    project = _project(tmp_path / "p", {"test/a.test.js": _APPENDS})
    obs = _run(project, tmp_path / "a")
    facts = obs.to_facts()
    f = "test/a.test.js"
    assert facts["passing"] == [f"{f}::fine"]
    assert facts["failing"] == [
        f"{f}::writes its own verdict",
        f"{f}::crashes later",
        f"{f}::too slow",
    ]
    assert facts["failure_types"] == {
        f"{f}::writes its own verdict": "",
        f"{f}::crashes later": "TypeError",
        f"{f}::too slow": "Timeout",
    }
    assert obs.ok is False and facts["failed"] == 3


def test_a_pass_recorded_beside_a_failure_never_hides_it(tmp_path: Path) -> None:
    """A record a test managed to append for itself (or two tests of one name)."""
    records = [
        {"event": "start", "reporter": "looprun-node"},
        {
            "event": "fail",
            "file": "t.js",
            "path": ["x"],
            "failure_type": "testCodeFailure",
            "error_name": "AssertionError",
            "message": "1 !== 2",
        },
        {"event": "pass", "file": "t.js", "path": ["x"]},
        {"event": "pass", "file": "t.js", "path": ["y"]},
        {"event": "end"},
    ]
    stream = tmp_path / "r.jsonl"
    stream.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    obs = NodeTestParser().parse(ParseInput(workdir=tmp_path, file=stream, exit_code=1))
    assert obs.facts["failing"] == ("t.js::x",) and obs.facts["passing"] == ("t.js::y",)
    assert obs.ok is False
