"""Authoring through the real CLI on a team repository: a template that extends `bugfix`
adds an observer and a rule without copying the tree, and a failing observer no rule
names still reaches the model."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

from e2e_helpers import SAMPLES, looprun, sample_copy, summary_of

from looprun.journal.read import read_jsonl

INVOICE = SAMPLES / "invoice"

TEAM = """\
looprun: 1
name: invoice-bugfix
extends: bugfix
observe:
  guard:                      # a team check that no refine rule names
    parser: exit_code
    run: >-
      python -c "import sys; src = open('invoice/totals.py').read();
      sys.exit('an empty-invoice guard is not the fix' if 'if not lines' in src else 0)"
refine:
  before:
    - id: fix_incomplete
      if: task.id == "fix" and tests.failed > 0
      then:
        retry: "The fix is not complete yet:\\n{{ tests.feedback }}"
"""


def _git(workdir: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=workdir,
        check=True,
        capture_output=True,
    )


def test_an_added_rule_fires_by_its_id_and_an_unnamed_failing_check_reaches_the_model(
    tmp_path: Path,
) -> None:
    workdir = sample_copy("invoice", tmp_path)
    (workdir / "loops").mkdir()
    (workdir / "loops" / "invoice-bugfix.yaml").write_text(TEAM, encoding="utf-8")
    _git(workdir, "add", "loops")
    _git(workdir, "commit", "-q", "-m", "team loop")

    explained = looprun("explain", "loops/invoice-bugfix.yaml", cwd=workdir)
    assert explained.returncode == 0, explained.stderr
    assert '1. [fix_incomplete] if task.id == "fix" and tests.failed > 0 -> retry' in (
        explained.stdout
    )
    assert "2. [policy_violation] if" in explained.stdout  # the inherited tree follows

    proc = looprun(
        "loops/invoice-bugfix.yaml",
        "--intent",
        (INVOICE / "intent.txt").read_text().strip(),
        "--workdir",
        str(workdir),
        "--model",
        f"script:{INVOICE / 'script.yaml'}",
        "--json",
        cwd=workdir,
    )
    assert proc.returncode == 0, proc.stderr
    summary = summary_of(proc)
    assert summary["outcome"] == "done"
    events = read_jsonl(Path(summary["run_dir"]) / "journal.jsonl")
    iterations = [e for e in events if e["event"] == "iteration"]
    assert len(iterations) == 3, [e["event"] for e in events]
    wrong_fix = iterations[1]
    assert wrong_fix["decision"]["action"] == "retry"
    # the journal names the rule as explain does, by its id
    assert wrong_fix["decision"]["rule"] == "fix_incomplete"
    message = wrong_fix["decision"]["message"]
    assert message.startswith("The fix is not complete yet:")
    assert "ZeroDivisionError" in message
    # the guard observer failed too, and no rule names it: its feedback is still there
    assert "[guard]" in message and "an empty-invoice guard is not the fix" in message
    assert json.loads(proc.stdout)["iterations"] == 3


def test_a_team_check_shows_in_explain_and_validate_of_the_repository(tmp_path: Path) -> None:
    workdir = tmp_path / "team"
    (workdir / "loops").mkdir(parents=True)
    (workdir / "loops" / "invoice-bugfix.yaml").write_text(TEAM, encoding="utf-8")
    (workdir / "loops" / "README.md").write_text("not a template\n", encoding="utf-8")
    proc = looprun("validate", "loops", cwd=workdir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "loops/invoice-bugfix.yaml: OK" in proc.stdout
    assert "README" not in proc.stdout
    text = textwrap.dedent(TEAM).replace("tests.failed > 0", "tests.faild > 0")
    (workdir / "loops" / "invoice-bugfix.yaml").write_text(text, encoding="utf-8")
    bad = looprun("validate", "loops", cwd=workdir)
    assert bad.returncode == 2
    where = "loops/invoice-bugfix.yaml:13:11: refine[0].if: "
    assert where + "observer 'tests' (parser junit) has no fact 'faild'" in bad.stdout
