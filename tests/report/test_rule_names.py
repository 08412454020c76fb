"""A refine rule with an ``id`` is called by it everywhere a run names the rule that
decided (the progress line, the report, the journal), as `looprun explain` calls it;
a rule without one keeps its number (see test_report_md_json)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.report import runs
from tests.support.cli import looprun


def test_a_rule_with_an_id_is_named_by_it_in_progress_report_and_journal(
    tmp_path: Path,
) -> None:
    repo, template, script = runs.make_project(tmp_path)
    rule = "  - if: tests.failed > 0\n"
    assert rule in runs.TEMPLATE
    template.write_text(
        runs.TEMPLATE.replace(rule, "  - id: fix_not_passing\n    if: tests.failed > 0\n")
    )
    explain = looprun("explain", str(template), cwd=repo)
    assert explain.returncode == 0 and "fix_not_passing" in explain.stdout, explain.stderr
    proc = looprun(
        str(template), "--intent", "fix", "--model", f"script:{script}", "--json", cwd=repo
    )
    assert proc.returncode == 0, proc.stderr
    progress = [ln for ln in proc.stderr.splitlines() if ln.startswith("#")]
    assert progress[0].endswith("→ retry (rule fix_not_passing: tests.failed > 0)"), progress
    run_id = json.loads(proc.stdout)["run_id"]
    md = looprun("report", run_id, cwd=repo).stdout
    assert "| retry | rule fix\\_not\\_passing \\(tests.failed &gt; 0\\) |" in md
    assert "rule 2" not in md
    html = looprun("report", run_id, "--format", "html", cwd=repo).stdout
    assert "rule fix_not_passing (tests.failed &gt; 0)" in html and "rule 2 " not in html
    journal = repo / ".looprun" / "runs" / run_id / "journal.jsonl"
    decisions = [
        e["decision"] for e in map(json.loads, journal.read_text().splitlines()) if "decision" in e
    ]
    assert decisions and decisions[0]["id"] == "fix_not_passing"
    assert decisions[0]["path"] == "2"  # the position stays on record for explain's numbering
