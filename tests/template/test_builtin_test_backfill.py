"""test_backfill's goal is coverage: its coverage observer can never be switched off,
or the loop could never reach its exit condition."""

from __future__ import annotations

from looprun.template.loader import load_template


def test_coverage_observer_always_runs_in_test_backfill() -> None:
    template = load_template("test_backfill")
    assert template.observe["cov"].when is None
    assert any("cov.percent" in str(c) for c in template.exit)


def test_fragment_coverage_observer_stays_switchable_elsewhere() -> None:
    template = load_template("bugfix")
    assert template.observe["cov"].when is not None
    assert "inputs.coverage" in str(template.observe["cov"].when)
