"""`test_backfill` judges the new tests by mutation, through the real CLI on a real sample.

Tests that call the code and assert nothing (`assert X` written as `X`, `assert X or
True`, `is not None`) cover every line the threshold asks for; they must never end the run
`done`, and the feedback must name what a test should have noticed. Real tests of the same
code end `done`. With the mutation check turned off the vacuous tests end `done`, so it is
this check that stops them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import SAMPLES, VACUOUS_UNIT_TESTS, scripted_backfill

from looprun.journal.read import read_jsonl

pytestmark = pytest.mark.e2e

HONEST = """\
from units.temperature import celsius_to_fahrenheit, fahrenheit_to_celsius, label
from units.wind import beaufort, kmh_to_knots


def test_labels():
    assert label(-0.5) == "freezing"
    assert label(0) == "cold"
    assert label(14.9) == "cold"
    assert label(15) == "mild"
    assert label(25) == "hot"


def test_conversions():
    assert celsius_to_fahrenheit(100) == 212
    assert fahrenheit_to_celsius(212) == 100
    assert kmh_to_knots(100) == 54.0


def test_beaufort():
    assert beaufort(0.5) == 0
    assert beaufort(30) == 5
    assert beaufort(150) == 12
"""


def _decisions(run_dir: Path) -> list[dict[str, Any]]:
    events = read_jsonl(run_dir / "journal.jsonl")
    return [e["decision"] for e in events if e["event"] == "iteration"]


def test_tests_that_assert_nothing_never_end_done(tmp_path: Path) -> None:
    # the verdict is the first iteration's (the model changes nothing after it, and the
    # same tree gets the same verdict: the stall that follows is the loop's, tested there)
    summary, run_dir = scripted_backfill(tmp_path, VACUOUS_UNIT_TESTS, "--max-iterations", "1")
    assert summary["outcome"] == "exhausted"
    (first,) = _decisions(run_dir)
    assert first["rule"] == "mutants_survived"
    # the feedback names the line and what was changed, which a test should notice
    assert "units/temperature.py:13: condition `celsius < 0` negated" in first["message"]
    assert (
        "units/wind.py:5: `return round(kmh / 1.852, 1)` changed to `return None`"
        in (first["message"])
    )
    report = json.loads((run_dir / "artifacts" / "mutants.json").read_text())
    assert report["tests"] == ["tests/test_cover.py"] and report["total"] == 20
    assert report["score"] < 0.5
    # the mutants were made in the check's copy: the working tree's code is as it was
    sample = SAMPLES / "backfill_units" / "units"
    workdir = run_dir.parents[2]  # WORKDIR/.looprun/runs/ID
    for name in ("temperature.py", "wind.py"):
        assert (workdir / "units" / name).read_bytes() == (sample / name).read_bytes()


def test_the_same_tests_end_done_with_the_mutation_check_off(tmp_path: Path) -> None:
    summary, run_dir = scripted_backfill(
        tmp_path, VACUOUS_UNIT_TESTS, "--set", "min_mutation_score=0"
    )
    assert (summary["outcome"], summary["iterations"]) == ("done", 1)
    assert not (run_dir / "artifacts" / "mutants.json").exists()


def test_tests_with_real_assertions_end_done(tmp_path: Path) -> None:
    summary, run_dir = scripted_backfill(tmp_path, HONEST)
    assert (summary["outcome"], summary["iterations"]) == ("done", 1)
    report = json.loads((run_dir / "artifacts" / "mutants.json").read_text())
    assert report["ok"] is True and report["total"] == 20
    assert report["score"] >= 0.5
