"""`looprun bugfix` on the real `inflection` sdist: failures already there at the start.

Tests that fail at the baseline do not block `fix`, so a model can make the new test pass by
special-casing its input while the bug's own pre-existing tests still fail. Here the planted
bug raises `KeyError` inside `inflection.ordinal` for every number whose last digit has no
suffix of its own (4th, 10th, 100th ...): 58 of the package's tests fail at the start, each
with a traceback through `inflection/__init__.py`. A "fix" that answers right for the new
test's 4 alone changes that file, so those failures are the run's to fix and it may not end
`done`; the honest fix does, on a src layout and with the tests inside the package. With
the original planted bug (13th), whose failures are assertions in the test file, the same
holds through what their bodies called (the outcome channel's `exercised`):
test_real_package_layouts.py. A failure that runs none of the changed code is left, and
the verdict names it; `--set strict=true` asks for the whole suite.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from e2e_helpers import looprun, prompt_of
from real_package import (
    ON_EVERY_LAYOUT,
    PACKAGE,
    Layout,
    edit_turns,
    planted_project,
    reproduce_turns,
    run_bugfix,
    run_events,
    run_suite,
)
from tests.support.git_repos import git

CODE = f"{PACKAGE}/__init__.py"
RAISES = ('        }.get(number % 10, "th")\n', "        }[number % 10]\n")
FOURS = "test_fours.py"
# a special case for the new test's input, ahead of the buggy lookup
FOUR_ONLY = (
    "    if number % 100 in (11, 12, 13):\n",
    '    if number == 4:\n        return "th"\n    if number % 100 in (11, 12, 13):\n',
)


def _raising(sdist: Path, tmp: Path, layout: Layout) -> Path:
    """The sdist with the lookup that raises for 0 and 4-9, committed."""
    return planted_project(sdist, tmp, RAISES, layout=layout)


def _reproduce_four(layout: Layout) -> list[dict[str, Any]]:
    test = (
        "from inflection import ordinal\n\n\n"
        "def test_four_takes_th():\n"
        '    assert ordinal(4) == "th"\n'
    )
    write = {"name": "write_file", "arguments": {"path": layout.tests_path(FOURS), "content": test}}
    return [{"tool_calls": [write]}, {"text": "The new test fails with KeyError: 4."}]


def _fix_decisions(summary: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (e["decision"]["action"], e["decision"].get("rule", ""))
        for e in run_events(summary, "iteration")
        if e.get("task") == "fix"
    ]


@ON_EVERY_LAYOUT
def test_special_casing_the_new_tests_input_is_not_a_fix(
    sdist: Path, tmp_path: Path, layout: Layout
) -> None:
    work = _raising(sdist, tmp_path, layout)
    special_case = edit_turns(layout.code, *FOUR_ONLY, "Fixed: ordinal(4) is 'th'.")
    turns = [*_reproduce_four(layout), *special_case]
    summary = run_bugfix(work, tmp_path, turns, "--max-iterations", "3", layout=layout)

    assert summary["outcome"] != "done", summary["stderr"]
    iterations = run_events(summary, "iteration")
    assert iterations[0]["decision"]["action"] == "done"  # reproduce: KeyError is the bug
    # the special case made the new test pass, and left the old failures through the code
    record = json.loads((Path(summary["run_dir"]) / "observe" / "2.json").read_text())
    tests = record["observers"]["tests"]
    assert layout.tests_path(f"{FOURS}::test_four_takes_th") in tests["passing"]
    assert f"{layout.suite}::test_ordinal[5-5th]" in tests["failing"]
    message = iterations[1]["decision"]["message"]
    assert "already failed at the start" in message, iterations[1]["decision"]
    assert f"{layout.suite}::test_ordinal[-5--5th]" in message
    assert f"{layout.suite}::test_ordinal[-4--4th]" not in message  # that one passes now
    # the model is told in its next request, with the failures' feedback
    assert "already failed at the start" in prompt_of(summary["run_dir"], 3)
    assert "still fail" not in summary["stderr"]  # a run that did not finish has no such line
    assert run_suite(work).returncode != 0


@ON_EVERY_LAYOUT
def test_the_fix_for_every_input_ends_done(sdist: Path, tmp_path: Path, layout: Layout) -> None:
    work = _raising(sdist, tmp_path, layout)
    fix = edit_turns(layout.code, RAISES[1], RAISES[0], "Fixed the lookup.")
    summary = run_bugfix(work, tmp_path, [*_reproduce_four(layout), *fix], layout=layout)

    assert (summary["outcome"], summary["iterations"]) == ("done", 2), summary["stderr"]
    assert "still_failing" not in summary
    assert "still fail" not in summary["stderr"]
    assert run_suite(work).returncode == 0


HONEST = ("    if number % 100 in (11, 12):\n", "    if number % 100 in (11, 12, 13):\n")
# a test that already fails at the start for a reason outside the package's code: its body
# calls none of it, so no fix of inflection/__init__.py is asked to make it pass
UNRELATED = "test_environment.py"
UNRELATED_ID = f"{UNRELATED}::test_a_service_is_configured"


def _with_unrelated_failure(sdist: Path, tmp: Path) -> Path:
    work = planted_project(sdist, tmp)
    (work / UNRELATED).write_text(
        "import os\n\n\n"
        "def test_a_service_is_configured():\n"
        '    assert os.environ.get("INFLECTION_SERVICE_URL_Q7"), "no service configured"\n'
    )
    git("add", UNRELATED, cwd=work)
    git("commit", "-q", "-m", "a test that needs a service", cwd=work)
    return work


def test_a_done_run_names_the_failures_it_left(sdist: Path, tmp_path: Path) -> None:
    """A failure that ran none of the code the run changed does not block `done`: the
    verdict, `--json` and the report say it is still there."""
    work = _with_unrelated_failure(sdist, tmp_path)
    turns = [*reproduce_turns(), *edit_turns(CODE, *HONEST, "Fixed ordinal.")]
    summary = run_bugfix(work, tmp_path, turns)

    assert summary["outcome"] == "done", summary["stderr"]
    assert summary["still_failing"]["tests"] == [UNRELATED_ID]
    said = [ln for ln in summary["stderr"].splitlines() if "still fail" in ln]
    assert len(said) == 1 and said[0].endswith(UNRELATED_ID), summary["stderr"]
    report = looprun("report", summary["run_id"], "--workdir", str(work))
    assert report.returncode == 0, report.stderr
    assert "that failed at the start still fail" in report.stdout and UNRELATED_ID in report.stdout


def test_strict_asks_for_the_whole_suite(sdist: Path, tmp_path: Path) -> None:
    work = _with_unrelated_failure(sdist, tmp_path)
    turns = [*reproduce_turns(), *edit_turns(CODE, *HONEST, "Fixed ordinal.")]
    summary = run_bugfix(work, tmp_path, turns, "--set", "strict=true", "--max-iterations", "2")

    assert summary["outcome"] != "done", summary["stderr"]
    assert _fix_decisions(summary) == [("retry", "strict")]
    message = run_events(summary, "iteration")[1]["decision"]["message"]
    assert "strict is set" in message and UNRELATED_ID in message
