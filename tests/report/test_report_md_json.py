"""`looprun report` in Markdown and JSON, read from a real run's directory and refs."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from tests.report.runs import HOSTILE
from tests.support.cli import looprun


def test_progress_lines_name_the_rule_and_the_verdict_gives_tokens_and_cost(finished_run):
    _, _, err = finished_run
    lines = [ln for ln in err.splitlines() if ln.startswith("#")]
    assert lines[0].endswith("→ retry (rule 2: tests.failed > 0)"), lines
    assert lines[1].endswith("→ done (exit conditions hold)"), lines
    verdict = err.strip().splitlines()[-1]
    assert verdict.startswith("→ done after 2 iteration(s)")
    assert verdict.endswith(" tokens, $0.0000]") and "[" in verdict


def test_json_report_has_the_timeline_diffs_tokens_and_limits(finished_run):
    repo, run_id, _ = finished_run
    proc = looprun("report", run_id, "--format", "json", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert (data["outcome"], data["intent"]) == ("done", "add() subtracts")
    first, second = data["iterations"]
    assert first["decision"] == "retry" and first["rule_path"] == "2"
    assert first["why"] == "tests.failed > 0" and re.search(r"mini\.yaml:22(:9)?$", first["rule"])
    assert [c["status"] for c in first["checks"]] == ["failed", "ok"]
    assert first["checks"][0]["first_failure"].startswith("tests/test_calc.py::test_add")
    assert first["files"] == [{"path": "src/calc.py", "added": 1, "removed": 1}]
    assert "-    return a - b\n+    return a * b" in first["diff"]
    # the second iteration's diff starts where the first one left the tree
    assert "-    return a * b\n+    return a + b" in second["diff"]
    assert [c["tool"] for c in second["tool_calls"]] == ["read_file", "edit_file"]
    assert second["decision"] == "done" and second["why"] == "all exit conditions hold"
    # tokens per iteration add up to the run's total
    assert first["tokens"] > 0 and first["tokens"] + second["tokens"] == data["tokens"]
    limits = {row["name"]: row for row in data["limits"]}
    assert limits["max_iterations"] == {"name": "max_iterations", "current": 2, "max": 4}
    assert limits["max_tokens"]["current"] == data["tokens"]
    assert data["changed"] == [{"path": "src/calc.py", "added": 1, "removed": 1}]


def test_markdown_report_for_a_pr_comment(finished_run):
    repo, run_id, _ = finished_run
    proc = looprun("report", run_id[:12], cwd=repo)  # a unique prefix names the run
    assert proc.returncode == 0, proc.stderr
    md = proc.stdout
    assert md.startswith("## looprun mini: ✅ done after 2 iteration(s)")
    assert "**Intent:** add\\(\\) subtracts" in md
    assert (
        "| 1 | `main` | edit\\_file×1 | ❌tests ✅diff | retry | rule 2 \\(tests.failed &gt; 0\\) |"
        in md
    )
    assert "```diff\n" in md and "+    return a + b" in md
    assert "| `max_iterations` | 2 | 4 |" in md
    # untrusted text is inert: outside code spans and fences (which GitHub shows as
    # text) the script and the image never appear as markup
    assert HOSTILE in md  # the first failure, in a code span
    prose = _outside_code(md)
    assert "<script" not in prose and "<img" not in prose


def _outside_code(md: str) -> str:
    """The Markdown without fenced blocks and inline code spans."""
    md = re.sub(r"^(`{3,})[^\n]*\n.*?^\1$", "", md, flags=re.S | re.M)
    return re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", md)


def test_markdown_is_bounded_and_says_what_was_cut(finished_run):
    repo, run_id, _ = finished_run
    full = looprun("report", run_id, cwd=repo).stdout
    proc = looprun("report", run_id, "--max-chars", "2000", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout) <= 2000 < len(full)
    assert "This report was shortened to fit: diffs left out" in proc.stdout
    assert f"looprun report {run_id} --format html" in proc.stdout


def test_output_file_and_unknown_run(finished_run, tmp_path: Path):
    repo, run_id, _ = finished_run
    out = tmp_path / "r.md"
    proc = looprun("report", run_id, "--output", str(out), cwd=repo)
    assert proc.returncode == 0 and proc.stdout == ""
    assert out.read_text().startswith("## looprun mini")
    bad = looprun("report", "nope", cwd=repo)
    assert bad.returncode == 2
    assert "no run 'nope'" in bad.stderr and "Traceback" not in bad.stderr


def test_pruned_checkpoints_leave_the_diff_out_and_say_why(tmp_path: Path):
    from tests.report.runs import real_run

    repo, run_id, _ = real_run(tmp_path)
    refs = subprocess.run(
        ["git", "for-each-ref", "--format=%(refname)", f"refs/looprun/{run_id}/"],
        cwd=repo, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert len(refs) == 2
    for ref in refs:
        subprocess.run(["git", "update-ref", "-d", ref], cwd=repo, check=True)
    data = json.loads(looprun("report", run_id, "--format", "json", cwd=repo).stdout)
    assert data["iterations"][0]["diff"] == ""
    assert "not in this repository" in data["iterations"][0]["diff_note"]
    # what the tools changed is still listed
    assert data["iterations"][0]["files"][0]["path"] == "src/calc.py"
