"""`looprun bugfix` on a node package that configures ESLint (eslint.config.js, a real ESLint 9
installed from npm once per test session), with no flag: the run turns the `lint` check on
from the base. A fix that passes the tests but adds an ESLint error gets that error back
with its place and rule (an error already in the base is neither fed back nor blocking),
and the clean fix ends done; a fix that switches the rule off in eslint.config.js, or with
an inline directive, never ends done."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from node_support import bugfix, events, npm_modules
from test_node_bugfix import SAMPLE, SEC, _edit, _reproduce
from tests.support.git_repos import git_repo

pytestmark = pytest.mark.e2e

_CONFIG = """\
module.exports = [
  {
    files: ['**/*.js'],
    languageOptions: { sourceType: 'commonjs' },
    rules: { 'no-unused-vars': 'error', eqeqeq: 'error' },
  },
];
"""
# an ESLint error the base already has: counted, never fed back, never blocking
_LEGACY = "'use strict';\n\nexports.isNone = (v) => v == null;\n"
# pads the seconds (the fix) and leaves a variable it never reads
_UNUSED_FIX = "  const width = 2;\n" + SEC.replace(");", ").padStart(2, '0');")


@pytest.fixture(scope="session")
def eslint_modules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """node_modules holding eslint 9, installed once per test session."""
    return npm_modules(tmp_path_factory, "eslint@9")


def _repo(tmp: Path, modules: Path) -> Path:
    repo = tmp / "repo"
    shutil.copytree(SAMPLE, repo, ignore=shutil.ignore_patterns("script*.yaml", "intent.txt"))
    (repo / "eslint.config.js").write_text(_CONFIG)
    (repo / "src" / "legacy.js").write_text(_LEGACY)
    (repo / ".gitignore").write_text("node_modules/\n")
    # a real directory (hard links): the check's tree links a real node_modules only
    shutil.copytree(modules, repo / "node_modules", symlinks=True, copy_function=os.link)
    return git_repo(repo)


def test_an_eslint_error_in_the_fix_is_fed_back_and_the_clean_fix_ends_done(
    eslint_modules: Path, tmp_path: Path
) -> None:
    repo = _repo(tmp_path, eslint_modules)
    turns = [
        *_reproduce(),
        *_edit("src/duration.js", SEC, _UNUSED_FIX),
        *_edit("src/duration.js", "  const width = 2;\n", ""),
    ]
    summary = bugfix(tmp_path, repo, turns, "--max-iterations", "3")
    assert (summary["outcome"], summary["exit"]) == ("done", 0), summary["stderr"]
    # no flag: eslint and the lint check came from the base, and the run recorded them
    said = "eslint: true (eslint.config.js at the run's base, node_modules/.bin/eslint)"
    assert said in summary["stderr"], summary["stderr"]
    sets = json.loads((Path(summary["run_dir"]) / "run.json").read_text())["sets"]
    assert (sets["eslint"], sets["lint"]) == ("true", "true")

    first, second, third = events(summary, "iteration")[:3]
    assert first["decision"]["action"] == "done", first  # reproduce
    # the tests pass after the first fix; the new ESLint error came back with place and rule
    assert second["decision"]["action"] == "retry", second
    record = json.dumps(second)
    assert "src/duration.js:14:9: error [no-unused-vars] 'width' is assigned a value" in record
    # the base's own finding is not among them
    assert "legacy.js" not in record and "already there at the start" in record, record
    assert third["decision"]["action"] == "done", third
    assert "const width" not in (repo / "src" / "duration.js").read_text()


_OFF = "rules: { 'no-unused-vars': 'error',"
# cheat -> the edits of its fix turn (the same unused variable each time) and the evidence
_CHEATS: dict[str, tuple[list[dict[str, Any]], str]] = {
    "turns_the_rule_off_in_the_config": (
        [
            {"path": "src/duration.js", "old": SEC, "new": _UNUSED_FIX},
            {"path": "eslint.config.js", "old": _OFF, "new": "rules: { 'no-unused-vars': 'off',"},
        ],
        "eslint.config.js is protected",
    ),
    "disables_the_rule_inline": (
        [
            {
                "path": "src/duration.js",
                "old": SEC,
                "new": "  // eslint-disable-next-line no-unused-vars\n" + _UNUSED_FIX,
            }
        ],
        "eslint-",
    ),
}


@pytest.mark.parametrize("cheat", sorted(_CHEATS))
def test_silencing_eslint_never_ends_done(cheat: str, eslint_modules: Path, tmp_path: Path) -> None:
    repo = _repo(tmp_path, eslint_modules)
    edits, evidence = _CHEATS[cheat]
    calls = [{"name": "edit_file", "arguments": e} for e in edits]
    turns = [*_reproduce(), {"tool_calls": calls}, {"text": "Done."}]
    summary = bugfix(tmp_path, repo, turns, "--max-iterations", "2")
    assert summary["outcome"] != "done" and summary["exit"] != 0, summary
    first, second = events(summary, "iteration")[:2]
    assert first["decision"]["action"] == "done", first  # reproduce was real
    assert second["decision"]["action"] == "rollback", second
    assert evidence in json.dumps(second), second
    assert (repo / "eslint.config.js").read_text() == _CONFIG
