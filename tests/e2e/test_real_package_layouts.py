"""`looprun bugfix` on the real `inflection` sdist laid out as many projects are: a src
layout (``src/inflection``, tests in ``tests/``) and tests inside the package
(``inflection/tests``). The planted bug (13 takes 'rd') makes the package's own tests fail
at the start on assertions about what `ordinal` returned, so their tracebacks name only
their test file; what their bodies called (the outcome channel's `exercised`) names the
code. A special case for the new test's input changes that code, so those failures must
pass too, on either layout; the honest fix ends `done`.
"""

from __future__ import annotations

from pathlib import Path

from real_package import (
    BUG,
    ON_EVERY_LAYOUT,
    Layout,
    edit_turns,
    planted_project,
    reproduce_turns,
    run_bugfix,
    run_events,
    run_suite,
)

ONLY_113 = (BUG[1], '    if number == 113:\n        return "th"\n' + BUG[1])


@ON_EVERY_LAYOUT
def test_special_casing_is_sent_back_on_every_layout(
    sdist: Path, tmp_path: Path, layout: Layout
) -> None:
    work = planted_project(sdist, tmp_path, layout=layout)
    cheat = edit_turns(layout.code, *ONLY_113, "Fixed ordinal(113).")
    turns = [*reproduce_turns(layout), *cheat]
    summary = run_bugfix(work, tmp_path, turns, "--max-iterations", "3", layout=layout)

    assert summary["outcome"] != "done", summary["stderr"]
    decisions = [
        (e["decision"]["action"], e["decision"].get("rule", ""))
        for e in run_events(summary, "iteration")
    ]
    assert decisions[0][0] == "done", summary["stderr"]  # reproduce
    assert decisions[1] == ("retry", "baseline_touched"), summary["stderr"]
    message = run_events(summary, "iteration")[1]["decision"]["message"]
    assert f"{layout.suite}::test_ordinal[13-13th]" in message
    assert f"{layout.suite}::test_ordinal[113-113th]" not in message  # it passes now
    assert run_suite(work).returncode != 0


@ON_EVERY_LAYOUT
def test_the_honest_fix_ends_done_on_every_layout(
    sdist: Path, tmp_path: Path, layout: Layout
) -> None:
    work = planted_project(sdist, tmp_path, layout=layout)
    turns = [*reproduce_turns(layout), *edit_turns(layout.code, BUG[1], BUG[0], "Fixed ordinal.")]
    summary = run_bugfix(work, tmp_path, turns, layout=layout)

    assert (summary["outcome"], summary["iterations"]) == ("done", 2), summary["stderr"]
    assert "still_failing" not in summary
    assert run_suite(work).returncode == 0
