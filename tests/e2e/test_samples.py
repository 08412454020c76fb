"""The samples end `done` through the real CLI, in more than one iteration."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from e2e_helpers import SAMPLES, looprun, sample_copy, summary_of

from looprun.journal.read import read_jsonl
from looprun.system.resources import schemas_dir


def _tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            h.update(str(p.relative_to(root)).encode() + p.read_bytes())
    return h.hexdigest()


@pytest.mark.parametrize("name", ["invoice", pytest.param("pagination", marks=pytest.mark.slow)])
def test_sample_ends_done_after_a_wrong_first_fix(name: str, tmp_path: Path) -> None:
    before = _tree_digest(SAMPLES / name)
    workdir = sample_copy(name, tmp_path)
    intent = (SAMPLES / name / "intent.txt").read_text().strip()
    proc = looprun(
        "bugfix",
        "--intent",
        intent,
        "--workdir",
        str(workdir),
        "--model",
        f"script:{SAMPLES / name / 'script.yaml'}",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    summary = summary_of(proc)
    assert summary["outcome"] == "done"
    assert summary["iterations"] == 3
    assert [(t["id"], t["outcome"], t["iterations"]) for t in summary["tasks"]] == [
        ("reproduce", "done", 1),
        ("fix", "done", 2),
    ]
    assert set(summary["usage"]) == {"prompt_tokens", "completion_tokens", "cost_usd"}
    assert "→ done after 3 iteration(s)" in proc.stderr
    assert "#2 fix:" in proc.stderr and "→ retry" in proc.stderr
    # the suite really is green in the working tree, and the samples are untouched
    import subprocess
    import sys

    check = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=workdir,
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stdout
    assert _tree_digest(SAMPLES / name) == before
    # every journal event matches the published schema
    import jsonschema

    schema = json.loads((schemas_dir() / "journal-event.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    events = list(read_jsonl(Path(summary["run_dir"]) / "journal.jsonl"))
    assert [e["event"] for e in events][:3] == ["run_started", "baseline", "plan"]
    assert events[-1]["event"] == "run_finished"
    for event in events:
        validator.validate(event)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))


@pytest.mark.slow
def test_runs_lists_outcomes(tmp_path: Path) -> None:
    workdir = sample_copy("invoice", tmp_path)
    intent = (SAMPLES / "invoice" / "intent.txt").read_text().strip()
    looprun(
        "bugfix",
        "--intent",
        intent,
        "--workdir",
        str(workdir),
        "--model",
        f"script:{SAMPLES / 'invoice' / 'script.yaml'}",
        "--max-iterations",
        "2",
    )
    proc = looprun("runs", "--workdir", str(workdir), "--json")
    rows = json.loads(proc.stdout)
    assert [(r["outcome"], r["iterations"]) for r in rows] == [("exhausted", 2)]
    text = looprun("runs", "--workdir", str(workdir)).stdout
    assert "exhausted" in text and "max_iterations reached" in text


def test_unfinished_run_reports_its_state(tmp_path: Path) -> None:
    workdir = sample_copy("invoice", tmp_path)
    proc = looprun(
        "bugfix",
        "--intent",
        "x",
        "--workdir",
        str(workdir),
        "--model",
        f"script:{SAMPLES / 'invoice' / 'script.yaml'}",
        "--max-iterations",
        "2",
        "--json",
    )
    assert proc.returncode == 3
    summary = summary_of(proc)
    assert summary["outcome"] == "exhausted" and summary["reason"] == "max_iterations reached"
    assert summary["state"]["tasks_completed"] == ["reproduce"]
    assert "ZeroDivisionError" in summary["state"]["last_failure"]
    assert "invoice/totals.py" in summary["state"]["changed_files"]
    assert "→ exhausted after 2 iteration(s): max_iterations reached" in proc.stderr


def test_bad_set_is_a_usage_error(tmp_path: Path) -> None:
    workdir = sample_copy("invoice", tmp_path)
    proc = looprun(
        "bugfix",
        "--intent",
        "x",
        "--workdir",
        str(workdir),
        "--model",
        f"script:{SAMPLES / 'invoice' / 'script.yaml'}",
        "--set",
        "nope=1",
    )
    assert proc.returncode == 2
    assert "unknown input(s) nope" in proc.stderr and "Traceback" not in proc.stderr
    assert not (workdir / ".looprun" / "runs").exists() or not any(
        (workdir / ".looprun" / "runs").iterdir()
    )
