"""test_backfill's goal is coverage: its coverage observer can never be switched off,
or the loop could never reach its exit condition."""

from __future__ import annotations

from looprun.template.loader import load_template


def test_coverage_observer_always_runs_in_test_backfill() -> None:
    template = load_template("test_backfill")
    assert template.observe["cov"].when is None
    assert any("cov.target_percent" in str(c) for c in template.exit)


def test_fragment_coverage_observer_stays_switchable_elsewhere() -> None:
    template = load_template("bugfix")
    assert template.observe["cov"].when is not None
    assert "inputs.coverage" in str(template.observe["cov"].when)


def test_coverage_data_never_lands_in_the_repository() -> None:
    """Every built-in template that runs the tests keeps coverage.py's data file with the
    run's artifacts, so `.coverage` never shows up as a change of the run."""
    context = {
        "inputs": {"test_command": "python -m pytest -q", "target": ["a.py"]},
        "run": {"artifacts": "/runs/1/artifacts"},
        "intent": "",
        "iteration": 1,
        "task": {},
    }
    for name in ("bugfix", "refactor", "test_backfill"):
        template = load_template(name)
        for observer in ("tests", "cov"):
            command = template.observe[observer].run.render(context)
            assert command.startswith("COVERAGE_FILE=/runs/1/artifacts/coverage.data "), (
                name,
                observer,
                command,
            )
