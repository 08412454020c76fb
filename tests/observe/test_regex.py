from __future__ import annotations

from pathlib import Path

import pytest
from observe_helpers import pytest_argv, run

from looprun.observe.base import ParseInput
from looprun.observe.regex import RegexParser

SAMPLES = {
    "mypy": (
        "src/a.py:12: error: Incompatible return value type  [return-value]\n"
        "src/a.py:3:5: note: See docs\nFound 1 error in 1 file",
        ("src/a.py", 12, "return-value"),
    ),
    "pyright": (
        '/w/src/a.py\n  /w/src/a.py:4:12 - error: "x" is not defined (reportUndefinedVariable)\n',
        ("/w/src/a.py", 4, "reportUndefinedVariable"),
    ),
    "tsc": (
        "src/app.ts(10,7): error TS2322: Type 'string' is not assignable to type 'number'.\n",
        ("src/app.ts", 10, "TS2322"),
    ),
    "eslint": (
        "/p/src/x.js:1:10: 'a' is defined but never used. [Error/no-unused-vars]\n",
        ("/p/src/x.js", 1, "no-unused-vars"),
    ),
    "eslint-compact": (
        "/p/src/x.js: line 3, col 1, Error - Unexpected var. (no-var)\n",
        ("/p/src/x.js", 3, "no-var"),
    ),
    "gcc": (
        "main.c: In function 'main':\n"
        "main.c:5:3: error: 'y' undeclared (first use in this function)\n",
        ("main.c", 5, None),
    ),
    "rustc": (
        "src/main.rs:2:13: error[E0425]: cannot find value `x` in this scope\n",
        ("src/main.rs", 2, "E0425"),
    ),
    "go-vet": (
        "# example\n./main.go:8:2: fmt.Printf format %d has arg s of wrong type string\n",
        ("main.go", 8, None),
    ),
}


@pytest.mark.parametrize("preset", sorted(SAMPLES))
def test_presets(tmp_path, preset):
    text, (file, line, rule) = SAMPLES[preset]
    obs = RegexParser().parse(
        ParseInput(workdir=tmp_path, output=text, exit_code=1, options={"preset": preset})
    )
    assert not obs.ok and obs.counts["errors"] == 1
    item = next(i for i in obs.items if i.severity == "error")
    assert (item.file, item.line, item.rule) == (file, line, rule)


def test_custom_pattern_and_bad_options(tmp_path):
    log = tmp_path / "lint.log"
    log.write_text("W a.py 3 style nit\nE b.py 7 real problem\n")
    pattern = r"^(?P<severity>[EW]) (?P<file>\S+) (?P<line>\d+) (?P<message>.*)$"
    obs = RegexParser().parse(ParseInput(workdir=tmp_path, file=log, options={"pattern": pattern}))
    # unknown severities count as errors
    assert obs.counts["total"] == 2 and not obs.ok
    for options, problem in [
        ({"pattern": "(unclosed"}, "not a valid regex"),
        ({"pattern": "(?P<file>x)"}, "needs a named group"),
        ({"preset": "cobol"}, "unknown preset"),
        ({}, "is required"),
    ]:
        bad = RegexParser().parse(ParseInput(workdir=tmp_path, file=log, options=options))
        assert not bad.ok and problem in bad.error


def test_nonzero_exit_without_matches_is_not_green(tmp_path):
    obs = RegexParser().parse(
        ParseInput(
            workdir=tmp_path, output="Traceback: crashed\n", exit_code=2, options={"preset": "mypy"}
        )
    )
    assert not obs.ok and "exited 2" in obs.feedback and "crashed" in obs.feedback


def test_pytest_text_fallback_on_real_output(buggy_project: Path):
    proc = run(pytest_argv(), buggy_project)
    obs = RegexParser().parse(
        ParseInput(
            workdir=buggy_project,
            output=proc.stdout,
            exit_code=proc.returncode,
            options={"preset": "pytest"},
        )
    )
    assert not obs.ok
    assert (obs.counts["failed"], obs.counts["passed"], obs.counts["tests"]) == (3, 1, 4)
    assert set(obs.facts["failing"]) == {
        "tests/test_invoice.py::test_total",
        "tests/test_invoice.py::test_average_empty",
        "tests/test_invoice.py::TestGroup::test_member",
    }
    total = next(i for i in obs.items if i.id.endswith("::test_total"))
    assert "expected 42, got 41" in total.message
    assert (total.file, total.line) == ("tests/test_invoice.py", 6)
    avg = next(i for i in obs.items if i.id.endswith("::test_average_empty"))
    assert (avg.file, avg.line) == ("src/invoice.py", 9)
    assert "E " in avg.detail
