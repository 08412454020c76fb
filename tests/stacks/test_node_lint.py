"""The node pack's `lint` check on a real TypeScript 5 and ESLint 9 (installed from npm once
per test session): looprun's lint runner runs the project's own `tsc --noEmit` and eslint
and writes their findings as one SARIF log, read by the sarif parser; each finding has its
place and rule, and a check that cannot run says so with an exit the pack calls
cannot-run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from node_support import PACK, node_package, npm_modules, run_pack_lint

from looprun.observe.feedback import item_line

pytestmark = pytest.mark.e2e

_TSCONFIG = {
    "compilerOptions": {"strict": True, "noEmit": True, "target": "es2022", "module": "commonjs"},
    "include": ["src"],
}
_ESLINT = (
    "module.exports = [{ files: ['**/*.js'],\n"
    "  rules: { 'no-unused-vars': 'error', eqeqeq: 'error', 'no-console': 'warn' } }];\n"
)


@pytest.fixture(scope="session")
def lint_modules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """node_modules holding typescript 5 and eslint 9, installed once per test session."""
    return npm_modules(tmp_path_factory, "typescript@5", "eslint@9")


def _project(root: Path, modules: Path, files: dict[str, str]) -> Path:
    package = {"name": "p", "version": "1.0.0", "private": True}
    return node_package(root, modules, package, files)


def test_tsc_and_eslint_findings_arrive_together_with_place_and_rule(
    lint_modules: Path, tmp_path: Path
) -> None:
    project = _project(
        tmp_path / "p",
        lint_modules,
        {
            "tsconfig.json": json.dumps(_TSCONFIG),
            "eslint.config.js": _ESLINT,
            "src/total.ts": (
                "export function total(xs: number[]): number {\n"
                "  return xs.reduce((a, b) => a + b, 0);\n}\n"
                "export const label: string = total([1, 2]);\n"
            ),
            "src/same.js": (
                "function same(a, b) {\n  const unused = 1;\n  console.log(a);\n"
                "  return a == b;\n}\nmodule.exports = same;\n"
            ),
        },
    )
    obs = run_pack_lint(project, tmp_path / "a", typecheck=True, eslint=True)
    assert obs.error is None, obs.feedback
    assert obs.ok is False and obs.exit_code == 1
    facts = obs.to_facts()
    assert (facts["errors"], facts["warnings"]) == (3, 1)
    found = {(i.file, i.line, i.col, i.rule, i.severity) for i in obs.items}
    assert found == {
        ("src/total.ts", 4, 14, "TS2322", "error"),
        ("src/same.js", 2, 9, "no-unused-vars", "error"),
        ("src/same.js", 4, 12, "eqeqeq", "error"),
        ("src/same.js", 3, 3, "no-console", "warning"),
    }
    # what the model reads: file:line:col, the rule, the tool's message
    lines = [item_line(i) for i in obs.items]
    assert "src/same.js:4:12: error [eqeqeq] Expected '===' and instead saw '=='." in lines
    assert any(x.startswith("src/total.ts:4:14: error [TS2322] Type 'number'") for x in lines)
    # each finding keyed, so one there at the baseline is not fed back again
    assert len(facts["finding_keys"]) == 4

    # eslint alone (typecheck off): the type error is not reported
    only = run_pack_lint(project, tmp_path / "b", typecheck=False, eslint=True)
    assert {i.rule for i in only.items} == {"no-unused-vars", "eqeqeq", "no-console"}
    # `lint` on with eslint off is the type check, as it always was
    tsc = run_pack_lint(project, tmp_path / "d", typecheck=False, eslint=False)
    assert [i.rule for i in tsc.items] == ["TS2322"]

    # a clean project: ok, exit 0
    (project / "src" / "total.ts").write_text("export const label: string = String(3);\n")
    (project / "src" / "same.js").write_text("module.exports = (a, b) => a === b;\n")
    clean = run_pack_lint(project, tmp_path / "c", typecheck=True, eslint=True)
    assert clean.ok is True and clean.exit_code == 0 and clean.to_facts()["errors"] == 0


def test_a_check_that_cannot_run_exits_with_the_pack_s_cannot_run_code(
    lint_modules: Path, tmp_path: Path
) -> None:
    lint = yaml.safe_load(PACK.read_text())["observe"]["lint"]
    # no tsconfig.json: tsc cannot check anything; an eslint config that does not load
    project = _project(
        tmp_path / "p", lint_modules, {"eslint.config.js": "module.exports = [{ rules: {"}
    )
    obs = run_pack_lint(project, tmp_path / "a", typecheck=True, eslint=True)
    assert obs.exit_code in lint["cannot_run_exit"]
    # the failures are error findings, so the count of errors never drops to zero
    assert obs.ok is False and obs.to_facts()["errors"] == 2
    assert {i.rule for i in obs.items} == {"tsc", "eslint"}
    assert any("could not check the project (exit 1)" in i.message for i in obs.items)
    # a legacy .eslintrc.json at the root (no eslint.config.*): eslint 9 is told so
    legacy = _project(
        tmp_path / "q",
        lint_modules,
        {
            ".eslintrc.json": json.dumps(
                {"root": True, "parserOptions": {"ecmaVersion": 2022}, "rules": {"eqeqeq": "error"}}
            ),
            "src/x.js": "module.exports = (a) => a == 1;\n",
        },
    )
    old = run_pack_lint(legacy, tmp_path / "b", typecheck=False, eslint=True)
    assert [(i.file, i.line, i.rule) for i in old.items] == [("src/x.js", 1, "eqeqeq")]
