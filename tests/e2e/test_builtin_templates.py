"""`refactor` and `test_backfill` run end to end through the real CLI on real samples.

Each sample's scripted model makes the mistakes a team sees in practice: editing a file
the template makes read-only, a change that breaks (or fails) the suite, a diff over the
limit, tests that pass but cover too little. The run must turn each into feedback and
still end `done` on fresh checks, with the read-only files untouched.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from e2e_helpers import SAMPLES, looprun, sample_copy, summary_of

from looprun.journal.read import read_jsonl

REFACTOR = SAMPLES / "refactor_shipping"
BACKFILL = SAMPLES / "backfill_units"
TARGETS = ["units/temperature.py", "units/wind.py"]


def _events(summary: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    events = read_jsonl(Path(summary["run_dir"]) / "journal.jsonl")
    return [e for e in events if e["event"] == kind]


def _git(workdir: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=workdir, capture_output=True, text=True, check=True
    ).stdout


def _suite(workdir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=workdir,
        capture_output=True,
        text=True,
    )


def test_refactor_refuses_test_edits_and_ends_green(tmp_path: Path) -> None:
    workdir = sample_copy("refactor_shipping", tmp_path)
    proc = looprun(
        "refactor",
        "--intent",
        (REFACTOR / "intent.txt").read_text().strip(),
        "--workdir",
        str(workdir),
        "--model",
        f"script:{REFACTOR / 'script.yaml'}",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    summary = summary_of(proc)
    assert (summary["outcome"], summary["iterations"]) == ("done", 3)
    decisions = [e["decision"] for e in _events(summary, "iteration")]
    assert [d["action"] for d in decisions] == ["rollback", "retry", "done"]
    # 1: the edit of a (protected) test was found on the real diff and undone, and the
    # model was told why
    (violation,) = _events(summary, "policy_violation")
    assert violation["rule"] == "path.protected" and "tests/test_rates.py" in violation["message"]
    assert "undone" in decisions[0]["message"] and "tests/test_rates.py" in decisions[0]["message"]
    # 2: the broken refactoring came back as the failing tests and their assertions
    assert "Restore the behaviour" in decisions[1]["message"]
    assert "test_heavy_domestic_parcel_pays_per_started_kilo" in decisions[1]["message"]
    assert "assert 450 == 570" in decisions[1]["message"]
    # 3: done on a green suite, with the tests exactly as they were
    assert summary["changed_files"] == ["shipping/rates.py"]
    assert _git(workdir, "status", "--porcelain", "--", "tests") == ""
    assert "def weight_surcharge" in (workdir / "shipping" / "rates.py").read_text()
    check = _suite(workdir)
    assert check.returncode == 0 and "4 passed" in check.stdout, check.stdout


def test_refactor_over_the_diff_limit_is_told_to_shrink(tmp_path: Path) -> None:
    workdir = sample_copy("refactor_shipping", tmp_path)
    proc = looprun(
        "refactor",
        "--intent",
        (REFACTOR / "intent.txt").read_text().strip(),
        "--set",
        "max_diff_lines=16",
        "--workdir",
        str(workdir),
        "--model",
        f"script:{REFACTOR / 'script_small_diff.yaml'}",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    summary = summary_of(proc)
    assert (summary["outcome"], summary["iterations"]) == ("done", 2)
    first, last = [e["decision"] for e in _events(summary, "iteration")]
    # the suite was green, yet the run went on: the diff was over the limit
    assert first["action"] == "retry"
    assert "The diff has 31 changed lines; the limit is 16" in first["message"]
    assert last["action"] == "done"
    numstat = _git(workdir, "diff", "--numstat").split()
    assert int(numstat[0]) + int(numstat[1]) <= 16
    assert _suite(workdir).returncode == 0


def _target_coverage(workdir: Path, summary: dict[str, Any]) -> float:
    """The targets' coverage as coverage.py computes it, from the run's own data file."""
    report = Path(summary["run_dir"]) / "artifacts" / "coverage.json"
    data = json.loads(report.read_text())
    assert sorted(data["files"]) == TARGETS  # a target no test imported still counts
    return float(data["totals"]["percent_covered"])


def test_backfill_writes_only_tests_until_the_targets_are_covered(tmp_path: Path) -> None:
    workdir = sample_copy("backfill_units", tmp_path)
    code_before = {p.name: p.read_bytes() for p in (workdir / "units").glob("*.py")}
    proc = looprun(
        "test_backfill",
        "--intent",
        (BACKFILL / "intent.txt").read_text().strip(),
        "--set",
        "target=" + ",".join(TARGETS),  # a JSON list is the same list (tests/loop)
        "--workdir",
        str(workdir),
        "--model",
        f"script:{BACKFILL / 'script.yaml'}",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    summary = summary_of(proc)
    assert (summary["outcome"], summary["iterations"]) == ("done", 4)
    decisions = [e["decision"] for e in _events(summary, "iteration")]
    assert [d["action"] for d in decisions] == ["retry", "rollback", "retry", "done"]
    # 1: the new test fails; the feedback says to fix the test, with its assertion
    assert "fix the tests" in decisions[0]["message"]
    assert "test_fifteen_degrees_is_cold" in decisions[0]["message"]
    assert "assert 'mild' == 'cold'" in decisions[0]["message"]
    # 2: bending the code to the test was refused and undone
    (violation,) = _events(summary, "policy_violation")
    assert "units/temperature.py" in violation["message"]
    assert decisions[1]["target"] == "previous"
    assert "units/temperature.py" in decisions[1]["message"]
    # 3: green, but under the threshold: the feedback names the untested file and lines
    assert "Coverage of the targets is 60.0%; it must reach 80%" in decisions[2]["message"]
    assert "units/wind.py:4: 0.0% covered" in decisions[2]["message"]
    assert "missing lines: 4-5, 8-13" in decisions[2]["message"]
    # done: only tests changed, no coverage data left in the tree, targets covered
    assert summary["changed_files"] == ["tests/test_labels.py", "tests/test_wind.py"]
    assert _git(workdir, "status", "--porcelain", "--ignored", "--", ".coverage") == ""
    assert {p.name: p.read_bytes() for p in (workdir / "units").glob("*.py")} == code_before
    assert _target_coverage(workdir, summary) >= 80.0
    assert _suite(workdir).returncode == 0
    prompts = (Path(summary["run_dir"]) / "exchanges.jsonl").read_text()
    assert "Target files: units/temperature.py, units/wind.py" in prompts
