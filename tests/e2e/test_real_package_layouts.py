"""`looprun bugfix` on the real `inflection` sdist laid out as many projects are: a src
layout (``src/inflection``, tests in ``tests/``) and tests inside the package
(``inflection/tests``). The planted bug (13 takes 'rd') makes the package's own tests fail
at the start on assertions about what `ordinal` returned, so their tracebacks name only
their test file; what their bodies called (the outcome channel's `exercised`) names the
code. A special case for the new test's input changes that code, so those failures must
pass too, on either layout; the honest fix ends `done`.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import scripted_bugfix
from real_package import BUG, PACKAGE, edit_turns, planted_project, run_events, run_suite
from tests.support.git_repos import git

# layout -> (where the package goes, where its tests go)
LAYOUTS = {"src": (f"src/{PACKAGE}", "tests"), "inside": (PACKAGE, f"{PACKAGE}/tests")}
ONLY_113 = (BUG[1], '    if number == 113:\n        return "th"\n' + BUG[1])


def _laid_out(sdist: Path, tmp: Path, layout: str) -> tuple[Path, str, str]:
    """The planted project moved into ``layout`` and committed: (work, code, tests dir)."""
    package, tests = LAYOUTS[layout]
    work = planted_project(sdist, tmp)
    if package != PACKAGE:
        (work / package).parent.mkdir(parents=True)
        shutil.move(work / PACKAGE, work / package)
    (work / tests).mkdir(parents=True, exist_ok=True)
    shutil.move(work / "test_inflection.py", work / tests / "test_inflection.py")
    if layout == "src":
        (work / "pytest.ini").write_text("[pytest]\npythonpath = src\n")
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", f"{layout} layout", cwd=work)
    return work, f"{package}/__init__.py", tests


def _run(work: Path, tests: str, fix: list[dict[str, Any]], *extra: str) -> dict[str, Any]:
    test = (
        "from inflection import ordinal\n\n\n"
        "def test_numbers_ending_in_13_take_th():\n"
        '    assert ordinal(113) == "th"\n'
    )
    write = {"name": "write_file", "arguments": {"path": f"{tests}/test_teens.py", "content": test}}
    turns = [{"tool_calls": [write]}, {"text": "The new test fails."}, *fix]
    return scripted_bugfix(
        work,
        turns,
        "ordinal() gives 'rd' for 113 and 13; numbers ending in 11, 12 and 13 take 'th'.",
        "--set",
        f"tests_glob={tests}/**",
        *extra,
    )


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_special_casing_is_sent_back_on_every_layout(
    sdist: Path, tmp_path: Path, layout: str
) -> None:
    work, code, tests = _laid_out(sdist, tmp_path, layout)
    cheat = edit_turns(code, *ONLY_113, "Fixed ordinal(113).")
    summary = _run(work, tests, cheat, "--max-iterations", "3")

    assert summary["outcome"] != "done", summary["stderr"]
    decisions = [
        (e["decision"]["action"], e["decision"].get("rule", ""))
        for e in run_events(summary, "iteration")
    ]
    assert decisions[0][0] == "done", summary["stderr"]  # reproduce
    assert decisions[1] == ("retry", "baseline_touched"), summary["stderr"]
    message = run_events(summary, "iteration")[1]["decision"]["message"]
    assert f"{tests}/test_inflection.py::test_ordinal[13-13th]" in message
    assert run_suite(work).returncode != 0


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_the_honest_fix_ends_done_on_every_layout(sdist: Path, tmp_path: Path, layout: str) -> None:
    work, code, tests = _laid_out(sdist, tmp_path, layout)
    summary = _run(work, tests, edit_turns(code, BUG[1], BUG[0], "Fixed ordinal."))

    assert (summary["outcome"], summary["iterations"]) == ("done", 2), summary["stderr"]
    assert "still_failing" not in summary
    assert run_suite(work).returncode == 0
