"""A refactoring that changes what no test checks never ends `done`.

`refactor`'s suite staying green proves nothing about lines no test runs or checks: the
python pack's `suite_mutants` observer runs the whole suite on small changes to each line
the run changed, and a line no test runs, or whose changes no test notices, is sent back.
The honest refactoring of the sample (every line it changes is checked) still ends
`done`; the same cheat with `--set require_pinned=false` ends `done`, so the check is
what stops it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import SAMPLES, journal_events, looprun, sample_copy, summary_of

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


def _run(workdir: Path, tmp_path: Path, *extra: str) -> dict[str, Any]:
    script = tmp_path / "cheat.yaml"
    call = {"name": "write_file", "arguments": {"path": "shipping/rates.py", "content": _CHEAT}}
    turns = [{"tool_calls": [call]}, {"text": "Extracted weight_surcharge."}]
    script.write_text(json.dumps(turns))
    proc = looprun(
        "refactor",
        "--intent",
        (REFACTOR / "intent.txt").read_text().strip(),
        "--workdir",
        str(workdir),
        "--model",
        f"script:{script}",
        "--max-iterations",
        "1",
        "--json",
        *extra,
    )
    return summary_of(proc)


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
