"""A refactoring that changes what no test checks never ends `done`.

`refactor`'s suite staying green proves nothing about lines no test runs or checks: the
python pack's `suite_mutants` observer runs the whole suite on small changes to each line
the run changed, and a line no test runs, or whose changes no test notices, is sent back.
The honest refactoring of the sample (every line it changes is checked) still ends
`done`; the same cheat with `--set require_pinned=false` ends `done`, so the check is
what stops it. The same on a real package (inflection 0.5.1, whose 455 tests leave one
line of `pluralize` unrun).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import SAMPLES, journal_events, looprun, sample_copy, summary_of
from real_package import BUG, planted_project

pytestmark = pytest.mark.e2e

REFACTOR = SAMPLES / "refactor_shipping"
# the helper is extracted as the intent asks, but an empty parcel now costs nothing
# (it cost the base rate): no test weighs one, and the suite stays green
_CHEAT = '''"""Shipping rates in cents."""


def weight_surcharge(weight_grams: int) -> int:
    """120 cents per started kilo over the first one."""
    if weight_grams <= 1000:
        return 0
    return (weight_grams - 1000 + 999) // 1000 * 120


def domestic_cost(weight_grams: int) -> int:
    if weight_grams <= 0:
        return 0
    return 450 + weight_surcharge(weight_grams)


def international_cost(weight_grams: int, zone: int) -> int:
    return 900 + 300 * zone + weight_surcharge(weight_grams)
'''


def _refactor(
    workdir: Path, tmp_path: Path, call: dict[str, Any], intent: str, *extra: str
) -> dict[str, Any]:
    """One iteration of `looprun refactor` in ``workdir`` whose model makes ``call``."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"tool_calls": [call]}, {"text": "Refactored."}]))
    proc = looprun(
        "refactor", "--intent", intent, "--workdir", str(workdir),
        "--model", f"script:{script}", "--max-iterations", "1", "--json", *extra,
    )  # fmt: skip
    return summary_of(proc)


def _run(workdir: Path, tmp_path: Path, *extra: str) -> dict[str, Any]:
    call = {"name": "write_file", "arguments": {"path": "shipping/rates.py", "content": _CHEAT}}
    intent = (REFACTOR / "intent.txt").read_text().strip()
    return _refactor(workdir, tmp_path, call, intent, *extra)


def test_a_refactoring_that_changes_an_unchecked_line_never_ends_done(tmp_path: Path) -> None:
    workdir = sample_copy("refactor_shipping", tmp_path)
    summary = _run(workdir, tmp_path)

    assert summary["outcome"] != "done", summary
    observed = json.loads((Path(summary["run_dir"]) / "observe" / "1.json").read_text())
    pinned = observed["observers"]["suite_mutants"]
    assert pinned["ran"] and pinned["ok"], pinned
    # the new early return is the one line no test runs; every other changed line is one
    # the suite notices a change to
    assert pinned["survived"] == ["shipping/rates.py:13: no test runs this line"], pinned
    assert pinned["killed"] == pinned["total"] - 1 >= 4, pinned
    assert observed["observers"]["tests"]["failing"] == []  # the suite alone is fooled
    (event,) = journal_events(summary["run_dir"], "iteration")
    decision = event["decision"]
    assert decision["rule"] == "unpinned", decision
    assert "shipping/rates.py:13: no test runs this line" in decision["message"]
    assert "characterization tests" in decision["message"]


def test_without_the_check_the_same_refactoring_ends_done(tmp_path: Path) -> None:
    workdir = sample_copy("refactor_shipping", tmp_path)
    summary = _run(workdir, tmp_path, "--set", "require_pinned=false")

    assert summary["outcome"] == "done", summary


# on a real package: inflection's `pluralize` flattened (the `else:` dropped). Its last
# `return word` (no rule matched) is a line the package's 455 tests never run
_NESTED = (
    "    else:\n"
    "        for rule, replacement in PLURALS:\n"
    "            if re.search(rule, word):\n"
    "                return re.sub(rule, replacement, word)\n"
    "        return word\n"
)
_FLAT_CHANGED = (
    "    for rule, replacement in PLURALS:\n"
    "        if re.search(rule, word):\n"
    "            return re.sub(rule, replacement, word)\n"
    '    return word + "s"\n'  # and a word no rule matches now takes an s
)
# the honest one keeps the structure and renames: every line it changes is checked
_RENAMED = (
    "    else:\n"
    "        for pattern, plural in PLURALS:\n"
    "            if re.search(pattern, word):\n"
    "                return re.sub(pattern, plural, word)\n"
    "        return word\n"
)


def _refactor_inflection(sdist: Path, tmp_path: Path, new: str) -> dict[str, Any]:
    work = planted_project(sdist, tmp_path, (BUG[0], BUG[0]))  # no bug: as published
    call = {
        "name": "edit_file",
        "arguments": {"path": "inflection/__init__.py", "old": _NESTED, "new": new},
    }
    return _refactor(work, tmp_path, call, "Simplify pluralize's control flow.")


def test_on_a_real_package_an_unchecked_behaviour_change_never_ends_done(
    sdist: Path, tmp_path: Path
) -> None:
    summary = _refactor_inflection(sdist, tmp_path, _FLAT_CHANGED)

    assert summary["outcome"] != "done", summary
    (event,) = journal_events(summary["run_dir"], "iteration")
    assert event["decision"]["rule"] == "unpinned", event["decision"]
    assert "inflection/__init__.py:" in event["decision"]["message"]
    assert "no test runs this line" in event["decision"]["message"]


def test_on_a_real_package_an_honest_refactoring_ends_done(sdist: Path, tmp_path: Path) -> None:
    summary = _refactor_inflection(sdist, tmp_path, _RENAMED)

    assert summary["outcome"] == "done", summary
    observed = json.loads((Path(summary["run_dir"]) / "observe" / "1.json").read_text())
    pinned = observed["observers"]["suite_mutants"]
    assert pinned["ran"] and pinned["survived"] == [] and pinned["killed"] >= 2, pinned
