"""Reproductions that call the code and then fail on their own never complete `reproduce`.

On `inflection` 0.5.1 with the planted `ordinal` bug (see real_package.py), a reproducing
test that calls `ordinalize(13)` and then raises, unconditionally or on a condition the
"fix" can switch without touching the bug (a file the fix creates), fails before the fix
for a reason that is not in the code under test. looprun's outcome plugin looks at where
each failure was raised: in the project's code, or at an assertion (or statement) in the
test that reads what the code returned; a failure the test raised itself is sent back
(`reproduce_self_raised`) before any fix is asked for. The honest reproduction, an assert
on what `ordinalize` returns, still ends `done` with the real fix.
Each runs on a src layout and with the tests inside the package (real_package.LAYOUTS).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from real_package import (
    BUG,
    MARKER_PATH,
    ON_EVERY_LAYOUT,
    Layout,
    edit_turns,
    planted_project,
    run_bugfix,
    run_events,
    write_call,
)

pytestmark = pytest.mark.e2e

# each test calls the code under test first, so its body exercised the project
_RAISES_AFTER = {
    "raises-unconditionally": (
        "import inflection\n\n\n"
        "def test_numbers_ending_in_13_take_th():\n"
        "    inflection.ordinalize(13)\n"
        '    raise AssertionError("ordinalize(13) should be 13th")\n'
    ),
    "raises-unless-a-file-exists": (
        "import os\n\nimport inflection\n\n\n"
        "def test_numbers_ending_in_13_take_th():\n"
        "    inflection.ordinalize(13)\n"
        f"    if not os.path.exists({MARKER_PATH}):\n"
        '        raise ValueError("ordinalize(13) should be 13th")\n'
    ),
}


@pytest.mark.parametrize("name", sorted(_RAISES_AFTER))
@ON_EVERY_LAYOUT
def test_a_reproduction_that_raises_after_calling_the_code_never_ends_done(
    sdist: Path, tmp_path: Path, name: str, layout: Layout
) -> None:
    turns = [
        {"tool_calls": [write_call(layout.new_test, _RAISES_AFTER[name])]},
        {"text": "The new test fails."},
        # the "fix": the file the second test looks for; the bug stays
        {"tool_calls": [write_call(layout.marker, "13th\n")]},
        {"text": "Fixed ordinalize."},
    ]
    work = planted_project(sdist, tmp_path, layout=layout)
    # variants off: without them nothing after `reproduce` would catch the file marker
    summary = run_bugfix(
        work, tmp_path, turns, "--set", "holdout_variants=0", "--max-iterations", "2", layout=layout
    )

    assert summary["outcome"] != "done", summary["stderr"]
    decision = run_events(summary, "iteration")[0]["decision"]
    assert decision["rule"] == "reproduce_self_raised", decision
    assert f"{layout.new_test}:" in decision["message"], decision
    assert "raise" in decision["message"], decision
    assert not (work / layout.marker).exists()  # `fix` never ran


@ON_EVERY_LAYOUT
def test_an_assert_on_what_the_code_returns_still_ends_done(
    sdist: Path, tmp_path: Path, layout: Layout
) -> None:
    """The honest control: an assertion on the returned value, directly and through a
    local the test assigned, then the real fix; the fresh run judges both failures the
    code's at `reproduce` and sees both pass at `fix`."""
    test = (
        "import inflection\n\n\n"
        "def test_numbers_ending_in_13_take_th():\n"
        '    assert inflection.ordinalize(13) == "13th"\n\n\n'
        "def test_113_takes_th():\n"
        "    said = inflection.ordinalize(113)\n"
        '    assert said == "113th"\n'
    )
    turns = [
        {"tool_calls": [write_call(layout.new_test, test)]},
        {"text": "The new tests fail."},
        *edit_turns(layout.code, BUG[1], BUG[0], "Fixed ordinal."),
    ]
    work = planted_project(sdist, tmp_path, layout=layout)
    summary = run_bugfix(work, tmp_path, turns, "--set", "holdout_variants=0", layout=layout)

    assert (summary["outcome"], summary["iterations"]) == ("done", 2), summary["stderr"]
    rules = [e["decision"]["rule"] for e in run_events(summary, "iteration")]
    assert rules[0] == "exit", rules
    first, second = (_observed(summary, n)["observers"]["fresh"] for n in (1, 2))
    failing = sorted([layout.new_test_id, f"{layout.new_test}::test_113_takes_th"])
    assert (first["ran"], sorted(first["failing"]), first["self_raised"]) == (True, failing, {})
    assert (second["ran"], second["ok"], second["passed"]) == (True, True, 2), second


def _observed(summary: dict[str, Any], number: int) -> dict[str, Any]:
    return json.loads((Path(summary["run_dir"]) / "observe" / f"{number}.json").read_text())
