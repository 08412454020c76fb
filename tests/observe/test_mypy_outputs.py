"""mypy through the real CLI: its own JSON (`-O json`, the `diagnostics` parser), and
`--pretty` text whose error code wraps onto a line of its own (the regex preset). A preset
offers only the facts it can fill."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SOURCE = """\
def f(x: int) -> str:
    return x


def g() -> None:
    value: dict[str, list[int]] = {"a": ["this is a string, not an int"]}
    f("a string argument that does not match the parameter type of f")
"""
BIN = str(Path(sys.executable).parent)


def looprun(*args: str, cwd: Path, env: dict[str, str] | None = None) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "looprun", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        env={**os.environ, "PATH": BIN + os.pathsep + os.environ["PATH"], **(env or {})},
    )
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("typed")
    (root / "src").mkdir()
    (root / "src" / "shapes.py").write_text(SOURCE, encoding="utf-8")
    return root


EXPECTED = [
    (
        "return-value",
        "src/shapes.py",
        2,
        'Incompatible return value type (got "int", expected "str")',
    ),
    ("list-item", "src/shapes.py", 6, 'List item 0 has incompatible type "str"; expected "int"'),
    (
        "arg-type",
        "src/shapes.py",
        7,
        'Argument 1 to "f" has incompatible type "str"; expected "int"',
    ),
]


def _found(obs: dict) -> list[tuple[str, str, int, str]]:
    return [(i["rule"], i["file"], i["line"], i["message"]) for i in obs["items"]]


def test_mypy_json_output_through_the_diagnostics_parser(project: Path) -> None:
    obs = looprun(
        "observe", "diagnostics", "--run", "mypy -O json src", "-o", "format=mypy", cwd=project
    )
    assert obs["ok"] is False
    assert _found(obs) == EXPECTED
    assert (obs["errors"], obs["warnings"], obs["total"], obs["files"]) == (3, 0, 3, 1)
    assert obs["items"][0]["col"] == 12  # mypy's 0-based column, shown 1-based
    assert "src/shapes.py:2:12: error [return-value] Incompatible return value" in (obs["feedback"])
    fixed = project / "fixed"
    fixed.mkdir(exist_ok=True)
    (fixed / "ok.py").write_text("def f(x: int) -> int:\n    return x\n", encoding="utf-8")
    clean = looprun(
        "observe", "diagnostics", "--run", "mypy -O json fixed", "-o", "format=mypy", cwd=project
    )
    assert clean["ok"] is True and clean["errors"] == 0


@pytest.mark.parametrize("columns", ["45", "60", "100"])
def test_pretty_output_keeps_each_error_code_however_it_wraps(project: Path, columns: str) -> None:
    obs = looprun(
        "observe", "regex", "--run", "mypy --pretty src", "-o", "preset=mypy",
        cwd=project, env={"COLUMNS": columns},
    )  # fmt: skip
    assert _found(obs) == EXPECTED
    assert obs["errors"] == 3


def test_a_preset_offers_only_the_facts_it_can_fill(project: Path) -> None:
    template = textwrap.dedent(
        """\
        looprun: 1
        name: typed
        observe:
          types: {parser: regex, run: "mypy src", options: {preset: mypy}}
          tests: {parser: regex, run: "python -m pytest", options: {preset: pytest}}
          typed: {parser: diagnostics, run: "mypy -O json src", options: {format: mypy}}
        act: {prompt: "{{ task.goal }}"}
        exit: [types.errors == 0, tests.failed == 0, typed.errors == 0]
        refine:
          - if: types.failed > 0 or typed.failed > 0
            then: retry
          - else: retry
        """
    )
    (project / "typed.yaml").write_text(template, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "looprun", "validate", "typed.yaml"],
        capture_output=True, text=True, cwd=project,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "typed.yaml:10:9: refine[0].if: observer 'types' (parser regex) has no fact " in (
        proc.stdout
    )
    assert "observer 'typed' (parser diagnostics) has no fact 'failed'" in proc.stdout
    assert "tests" not in proc.stdout  # the pytest preset does count tests


def test_pyright_and_eslint_json_shapes(tmp_path: Path) -> None:
    """The documented report shapes of `pyright --outputjson` and `eslint -f json`."""
    pyright = {
        "version": "1.1.390",
        "generalDiagnostics": [
            {
                "file": str(tmp_path / "src" / "a.py"),
                "severity": "error",
                "message": 'Type "int" is not assignable to return type "str"',
                "range": {
                    "start": {"line": 1, "character": 11},
                    "end": {"line": 1, "character": 12},
                },
                "rule": "reportReturnType",
            },
            {
                "file": str(tmp_path / "src" / "a.py"),
                "severity": "information",
                "message": "Import cycle",
                "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}},
            },
        ],
        "summary": {"errorCount": 1, "warningCount": 0, "informationCount": 1},
    }
    eslint = [
        {
            "filePath": str(tmp_path / "web" / "app.js"),
            "messages": [
                {
                    "ruleId": "no-unused-vars",
                    "severity": 2,
                    "message": "'x' is defined but never used.",
                    "line": 3,
                    "column": 7,
                },
                {
                    "ruleId": "eqeqeq",
                    "severity": 1,
                    "message": "Expected '===' and instead saw '=='.",
                    "line": 9,
                    "column": 12,
                },
            ],
            "errorCount": 1,
            "warningCount": 1,
        }
    ]
    (tmp_path / "pyright.json").write_text(json.dumps(pyright))
    (tmp_path / "eslint.json").write_text(json.dumps(eslint))
    p = looprun("observe", "diagnostics", "pyright.json", "-o", "format=pyright", cwd=tmp_path)
    assert [(i["rule"], i["file"], i["line"], i["col"], i["severity"]) for i in p["items"]] == [
        ("reportReturnType", "src/a.py", 2, 12, "error"),
        (None, "src/a.py", 1, 1, "note"),
    ]
    e = looprun("observe", "diagnostics", "eslint.json", "-o", "format=eslint", cwd=tmp_path)
    assert (e["errors"], e["warnings"], e["ok"]) == (1, 1, False)
    assert (
        "web/app.js:3:7: error [no-unused-vars] 'x' is defined but never used." in (e["feedback"])
    )
