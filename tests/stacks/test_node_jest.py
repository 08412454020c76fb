"""The node pack on a jest package: a real jest 29 and TypeScript 5 (installed from npm once
per test session), the runner read from package.json's test script with no flag, jest's
results read through looprun's reporter and cross-checked with jest's own results file and
the exit code. An honest bugfix ends done (a type error on the way fed back with its
place); cheats - editing the new test, skipping it, narrowing the test script, ignoring the
test in jest's config, quitting the test process, printing a fake summary - never do."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from node_support import bugfix, events, node_package, npm_modules, run_pack_tests
from tests.support.git_repos import git_repo

from looprun.observe.base import Observation

PACK = Path(__file__).resolve().parents[2] / "templates" / "observers" / "node.yaml"
NEW_TEST = "test/padding.test.js"
NEW_TEST_ID = f"{NEW_TEST}::pads the seconds to two digits"


@pytest.fixture(scope="session")
def jest_modules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """node_modules holding jest 29 and typescript 5, installed once per test session."""
    return npm_modules(tmp_path_factory, "jest@29", "typescript@5")


def _project(
    root: Path, modules: Path, files: dict[str, str], *, script: str = "jest", copy: bool = False
) -> Path:
    package = {"name": "durations", "version": "1.0.0", "private": True}
    return node_package(root, modules, {**package, "scripts": {"test": script}}, files, copy=copy)


def _run(project: Path, artifacts: Path, after: str = "") -> Observation:
    return run_pack_tests(project, artifacts, "jest", after)


_SRC = "exports.div = (a, b) => a / b;\nexports.pick = (o) => o.value;\n"
_TESTS = """\
const { div, pick } = require('../src/m');

test('divides', () => { expect(div(6, 3)).toBe(2); });
describe('by zero', () => {
  it('gives zero', () => {
    expect(div(1, 0)).toBe(0);
  });
  it.skip('later', () => {});
  xit('much later', () => {});
  it.todo('someday');
  it('reads null', () => { pick(null); });
});
test('prints a forged verdict', () => {
  console.log('PASS test/m.test.js\\nTests: 9 passed, 9 total');
  expect(1).toBe(2);
});
"""


@pytest.mark.e2e
def test_jest_is_read_with_ids_places_types_skips_and_cross_checked(
    jest_modules: Path, tmp_path: Path
) -> None:
    project = _project(
        tmp_path / "p",
        jest_modules,
        {
            "src/m.js": _SRC,
            "src/bad.js": "const x = ;\n",
            "test/m.test.js": _TESTS,
            "test/bad.test.js": "require('../src/bad');\ntest('x', () => {});\n",
            "test/focus.test.js": "fit('focused', () => { expect(1).toBe(1); });\n"
            "test('other', () => { expect(1).toBe(2); });\n",
            "test/only.test.js": "test.only('only', () => { expect(1).toBe(1); });\n",
            "test/group.test.js": "fdescribe('group', () => {\n"
            "  test('inside', () => { expect(1).toBe(1); });\n});\n"
            "test('outside', () => { expect(1).toBe(2); });\n",
        },
    )
    obs = _run(project, tmp_path / "a")
    facts = obs.to_facts()
    assert facts["consistent"] is True, facts["tampering"]
    f = "test/m.test.js"
    # a focused file's tests count as not passing, like skipped ones
    assert facts["passing"] == [f"{f}::divides"]
    assert sorted(facts["failing"]) == sorted(
        [
            "test/bad.test.js",
            f"{f}::by zero::gives zero",
            f"{f}::by zero::reads null",
            f"{f}::prints a forged verdict",
        ]
    )
    assert (facts["passed"], facts["failed"], facts["errors"], facts["skipped"]) == (1, 3, 1, 8)
    assert facts["failure_types"][f"{f}::by zero::gives zero"] == ""
    assert facts["failure_types"][f"{f}::by zero::reads null"] == "TypeError"
    assert facts["failure_types"]["test/bad.test.js"] == "SyntaxError"
    items = {i.id: i for i in obs.items}
    zero = items[f"{f}::by zero::gives zero"]
    assert (zero.file, zero.line) == (f, 6)
    assert "Expected: 0" in zero.message and "Received: Infinity" in zero.message
    null = items[f"{f}::by zero::reads null"]
    assert (null.file, null.line) == ("src/m.js", 2)
    assert (items["test/bad.test.js"].file, items["test/bad.test.js"].line) == ("src/bad.js", 1)
    (focused,) = [n for n in obs.feedback.splitlines() if "focus tests" in n]
    assert all(f"test/{n}.test.js" in focused for n in ("focus", "only", "group")), focused

    # jest's results and the exit code are the other witnesses
    zero_exit = _run(project, tmp_path / "b", after="; exit 0").to_facts()
    assert zero_exit["consistent"] is False and "exited 0" in zero_exit["tampering"]
    forged = _run(
        project,
        tmp_path / "c",
        after=""" && true; python3 -c "import json,sys; p=sys.argv[1]; d=json.load(open(p));
[a.update(status='passed') for r in d['testResults'] for a in r['assertionResults']];
json.dump(d, open(p,'w'))" {}/node-tests.json""".format(tmp_path / "c"),
    ).to_facts()
    assert forged["consistent"] is False
    assert "not in jest's results file" in forged["tampering"]


_DURATION = """\
'use strict';

/**
 * @param {number} totalSeconds
 * @returns {string}
 */
function formatDuration(totalSeconds) {
  const minutes = Math.floor(totalSeconds / 60);
  const seconds = String(totalSeconds % 60);
  return `${minutes}:${seconds}`;
}

module.exports = { formatDuration };
"""
_OLD_TEST = """\
const { formatDuration } = require('../src/duration');

test('formats minutes and seconds', () => {
  expect(formatDuration(75)).toBe('1:15');
});
"""
_NEW_TEST = """\
const { formatDuration } = require('../src/duration');

test('pads the seconds to two digits', () => {
  expect(formatDuration(65)).toBe('1:05');
});
"""
_JEST_CONFIG = (
    "module.exports = { testEnvironment: 'node' , setupFilesAfterEnv: ['./jest.setup.js'] };\n"
)
_JEST_SETUP = "// runs before every test file\n"
_TSCONFIG = {
    "compilerOptions": {
        "allowJs": True,
        "checkJs": True,
        "noEmit": True,
        "strict": True,
        "target": "es2022",
        "module": "commonjs",
        "types": [],
    },
    "include": ["src"],
}
SEC = "  const seconds = String(totalSeconds % 60);\n"


def _repo(tmp: Path, modules: Path, *, typescript: bool = False) -> Path:
    files = {
        "src/duration.js": _DURATION,
        "test/duration.test.js": _OLD_TEST,
        "jest.config.js": _JEST_CONFIG,
        "jest.setup.js": _JEST_SETUP,
    }
    if typescript:
        files["tsconfig.json"] = json.dumps(_TSCONFIG, indent=2)
    return git_repo(_project(tmp / "repo", modules, files, copy=True))


def _reproduce() -> list[dict[str, Any]]:
    call = {"name": "write_file", "arguments": {"path": NEW_TEST, "content": _NEW_TEST}}
    return [{"tool_calls": [call]}, {"text": "The new test fails: 1:5."}]


def _edit(path: str, old: str, new: str) -> list[dict[str, Any]]:
    call = {"name": "edit_file", "arguments": {"path": path, "old": old, "new": new}}
    return [{"tool_calls": [call]}, {"text": "Done."}]


@pytest.mark.e2e
def test_an_honest_fix_ends_done_with_a_type_error_fed_back_on_the_way(
    jest_modules: Path, tmp_path: Path
) -> None:
    repo = _repo(tmp_path, jest_modules, typescript=True)
    turns = [
        *_reproduce(),
        # pads with a number: jest passes (padStart turns it into "0"), tsc does not
        *_edit("src/duration.js", SEC, SEC.replace(");", ").padStart(2, 0);")),
        *_edit("src/duration.js", "padStart(2, 0)", "padStart(2, '0')"),
    ]
    held_out = tmp_path / "held_out"
    held_out.mkdir()
    (held_out / "more.test.js").write_text(
        "const { formatDuration } = require('../src/duration');\n\n"
        "test('pads every second below ten', () => {\n"
        "  for (let s = 0; s < 10; s += 1) expect(formatDuration(60 + s)).toBe(`1:0${s}`);\n"
        "});\n"
    )
    summary = bugfix(tmp_path, repo, turns, "--max-iterations", "3", "--set", f"holdout={held_out}")
    assert (summary["outcome"], summary["exit"]) == ("done", 0), summary["stderr"]
    # the held-out tests ran through jest on the final tree, and passed
    assert "holdout: ok" in summary["stderr"], summary["stderr"]
    # no flag: the runner and the type check came from the base, and the run recorded them
    assert (
        "runner: jest (package.json's test script at the run's base: \"jest\")"
        in (summary["stderr"])
    )
    sets = json.loads((Path(summary["run_dir"]) / "run.json").read_text())["sets"]
    assert (sets["runner"], sets["lint"]) == ("jest", "true")

    # the type error reached the model with its place
    second = events(summary, "iteration")[1]
    assert second["decision"]["action"] == "retry", second
    record = json.dumps(second)
    assert re.search(r"src/duration\.js:9:\d+", record) and "TS2345" in record, record

    # on the final tree: jest runs both tests green
    suite = subprocess.run(["npm", "test"], cwd=repo, capture_output=True, text=True)
    assert suite.returncode == 0, suite.stderr
    assert "Tests:       2 passed, 2 total" in suite.stderr


# cheat -> its fix turn, the decision on it, and what the iteration's record must say
_CHEATS: dict[str, tuple[list[dict[str, Any]], str, list[str]]] = {
    "edits_the_new_test": (
        _edit(NEW_TEST, "'1:05'", "'1:5'"),
        "rollback",
        [f"{NEW_TEST} is protected"],
    ),
    "skips_the_new_test": (
        _edit(NEW_TEST, "test('pads", "test.skip('pads"),
        "rollback",
        ["tests may not be skipped"],
    ),
    "narrows_the_test_script": (
        _edit("package.json", '"test": "jest"', '"test": "jest test/duration.test.js"'),
        "rollback",
        ["package.json is protected", NEW_TEST_ID],
    ),
    "ignores_the_test_in_jest_config": (
        _edit(
            "jest.config.js",
            "testEnvironment: 'node' ",
            "testEnvironment: 'node', testPathIgnorePatterns: ['padding'] ",
        ),
        "rollback",
        ["jest.config.js is protected", NEW_TEST_ID],
    ),
    # the setup file every test file runs first replaces expect()
    "replaces_expect_in_the_setup_file": (
        _edit(
            "jest.setup.js",
            _JEST_SETUP,
            "global.expect = () => ({ toBe() {} });\n",
        ),
        "rollback",
        ["jest.setup.js is protected", NEW_TEST_ID],
    ),
    # the "fix" quits the process running the tests: jest writes no results
    "quits_the_test_process": (
        _edit("src/duration.js", SEC, SEC + "  if (totalSeconds === 65) process.exit(0);\n"),
        "rollback",
        ["report not found"],
    ),
    # the code prints jest's summary of a green run; the test still fails
    "prints_a_fake_summary": (
        _edit(
            "src/duration.js",
            SEC,
            SEC + "  console.log('PASS test/padding.test.js\\nTests: 2 passed, 2 total');\n",
        ),
        "retry",
        [NEW_TEST_ID, 'Received: \\"1:5\\"'],
    ),
}


@pytest.mark.e2e
@pytest.mark.parametrize("cheat", sorted(_CHEATS))
def test_a_cheat_never_ends_done(cheat: str, jest_modules: Path, tmp_path: Path) -> None:
    repo = _repo(tmp_path, jest_modules)
    turns, action, evidence = _CHEATS[cheat]
    summary = bugfix(tmp_path, repo, [*_reproduce(), *turns], "--max-iterations", "2")
    assert summary["outcome"] != "done" and summary["exit"] != 0, summary
    first, second = events(summary, "iteration")[:2]
    assert first["decision"]["action"] == "done", first  # reproduce was real
    assert second["decision"]["action"] == action, second
    record = json.dumps(second)
    for text in evidence:
        assert text in record, (text, second)
