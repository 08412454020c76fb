"""looprun's node lint runner on stand-in tools (small node scripts that print what tsc and
eslint print): both tools' findings merged into one SARIF log the sarif parser reads, each
with its place and rule; a tool that crashes or is missing is an error finding and an exit
the pack calls cannot-run, never a clean check. The real tools: test_node_lint.py."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from node_support import PACK
from tests.support.tools import require

from looprun.checks import stacks
from looprun.checks.runner import observe_command
from looprun.checks.stacks.node import LINT_RUNNER
from looprun.observe.base import Observation
from looprun.observe.feedback import item_line

_TSC = """\
process.stdout.write([
  "src/a.ts(3,7): error TS2322: Type 'number' is not assignable to type 'string'.",
  "src/b.ts(10,1): error TS2304: Cannot find name 'x'.",
  "  a continuation line tsc indents",
  "",
].join("\\n"));
process.exitCode = 2;
"""
_ESLINT = """\
const path = require('node:path');
if (!process.argv.includes('json')) process.exit(9);
const file = path.resolve('src/c.js');
process.stdout.write(JSON.stringify([{ filePath: file, messages: [
  { ruleId: 'eqeqeq', severity: 2, message: "Expected '===' and instead saw '=='.",
    line: 4, column: 12 },
  { ruleId: 'no-console', severity: 1, message: 'Unexpected console statement.',
    line: 2, column: 3 },
  { ruleId: null, fatal: true, severity: 2, message: 'Parsing error: Unexpected token',
    line: 9, column: 1 },
] }]));
process.exitCode = 1;
"""
_CRASH = "process.stderr.write('Oops! Something went wrong!\\nTypeError: bad config\\n');\n"


def _node() -> str:
    return require("node", "apt-get install nodejs npm")


def _lint(workdir: Path, tools: str) -> Observation:
    out = workdir / "lint.sarif"
    return observe_command(
        "sarif",
        workdir=workdir,
        command=f'node "$LOOPRUN_NODE_LINT" {out} {tools}',
        file=out,
        extra_env=stacks.get("node").env,
        timeout_s=60,
    )


def test_both_tools_findings_are_merged_with_place_rule_and_severity(tmp_path: Path) -> None:
    node = _node()
    (tmp_path / "tsc.js").write_text(_TSC)
    (tmp_path / "eslint.js").write_text(_ESLINT)
    (tmp_path / "eslint.config.js").write_text("module.exports = [];\n")
    obs = _lint(tmp_path, f"::tsc {node} tsc.js ::eslint {node} eslint.js")
    assert obs.error is None and obs.exit_code == 1 and obs.ok is False
    assert (obs.to_facts()["errors"], obs.to_facts()["warnings"]) == (4, 1)
    assert sorted((i.file, i.line, i.col, i.rule, i.severity) for i in obs.items) == [
        ("src/a.ts", 3, 7, "TS2322", "error"),
        ("src/b.ts", 10, 1, "TS2304", "error"),
        ("src/c.js", 2, 3, "no-console", "warning"),
        ("src/c.js", 4, 12, "eqeqeq", "error"),
        ("src/c.js", 9, 1, "eslint/parse-error", "error"),
    ]
    assert "src/c.js:4:12: error [eqeqeq] Expected '===' and instead saw '=='." in [
        item_line(i) for i in obs.items
    ]
    doc = json.loads((tmp_path / "lint.sarif").read_text())
    assert [r["tool"]["driver"]["name"] for r in doc["runs"]] == ["tsc", "eslint"]


def test_a_tool_that_crashes_or_is_missing_is_an_error_and_cannot_run(tmp_path: Path) -> None:
    node = _node()
    cannot_run = yaml.safe_load(PACK.read_text())["observe"]["lint"]["cannot_run_exit"]
    (tmp_path / "crash.js").write_text(_CRASH + "process.exitCode = 2;\n")
    (tmp_path / "tsc_usage.js").write_text(
        "console.log('error TS5058: no tsconfig');\n" + "process.exitCode = 1;\n"
    )
    crashed = _lint(tmp_path, f"::eslint {node} crash.js")
    assert crashed.exit_code == 2 and crashed.exit_code in cannot_run
    (item,) = crashed.items
    assert item.rule == "eslint" and item.severity == "error"
    assert "could not check the project (exit 2)" in item.message and "bad config" in item.message
    # tsc's exit 1 (its options or project file are wrong) is not a clean type check
    usage = _lint(tmp_path, f"::tsc {node} tsc_usage.js")
    assert usage.exit_code in cannot_run and usage.to_facts()["errors"] == 1
    missing = _lint(tmp_path, "::eslint node_modules/.bin/eslint .")
    assert missing.exit_code == 127 and missing.exit_code in cannot_run
    assert missing.to_facts()["errors"] == 1 and "not found" in missing.items[0].message
    # no tool at all: nothing was checked
    assert _lint(tmp_path, "").exit_code in cannot_run
    assert LINT_RUNNER.is_file()
