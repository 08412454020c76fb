"""The honest exit: a model that finds the task cannot be done as asked calls
``flag_for_human`` and the run ends ``escalated`` (exit 5) with its reason, never ``done``.

Through the real CLI on the invoice sample with a scripted model. The reason is model
output: shown as written (never rendered as a template), redacted, bounded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from e2e_helpers import looprun, sample_copy

INTENT = "summary() crashes with ZeroDivisionError when every line of an invoice is cancelled"
SECRET = "sk-honest-exit-0123456789abcdef"
REASON = (
    "The report contradicts the spec: totals of cancelled lines must be both 0 and 1250. "
    "{{ 7 * 7 }} {% raw %}"
)
FLAG = {"name": "flag_for_human", "arguments": {"reason": REASON + " key=" + SECRET}}
WRITE = {"name": "write_file", "arguments": {"path": "after_flag.txt", "content": "x"}}


def _run(work: Path, tmp: Path, turns: list[dict[str, Any]], template: str = "bugfix") -> Any:
    script = tmp / "script.yaml"
    script.write_text(yaml.safe_dump(turns, sort_keys=False))
    return looprun(
        template,
        "--intent",
        INTENT,
        "--workdir",
        str(work),
        "--model",
        f"script:{script}",
        "--json",
        "--max-iterations",
        "2",
        env={"HONEST_EXIT_API_KEY": SECRET},
        timeout=600,
    )


def _events(run_dir: Path, kind: str) -> list[dict[str, Any]]:
    lines = (run_dir / "journal.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == kind]


def test_flag_for_human_ends_the_run_escalated_with_the_reason(tmp_path: Path) -> None:
    work = sample_copy("invoice", tmp_path)
    # the flag and a write in the same reply: the write after the flag is not run
    proc = _run(work, tmp_path, [{"tool_calls": [FLAG, WRITE]}, {"text": "unused"}])

    assert proc.returncode == 5, proc.stderr
    summary = json.loads(proc.stdout)
    assert (summary["outcome"], summary["code"]) == ("escalated", "flag_for_human")
    assert summary["iterations"] <= 1
    reason = summary["reason"]
    assert "The report contradicts the spec" in reason
    assert "{{ 7 * 7 }} {% raw %}" in reason  # data, never rendered
    assert SECRET not in proc.stdout + proc.stderr and "[redacted]" in reason
    assert "contradicts the spec" in proc.stderr  # the verdict line
    assert not (work / "after_flag.txt").exists()
    run_dir = Path(summary["run_dir"])
    report = looprun("report", str(run_dir), "--format", "md")
    assert report.returncode == 0, report.stderr
    shown = report.stdout + "".join(p.read_text() for p in run_dir.glob("report*"))
    assert "contradicts the spec" in shown and SECRET not in shown
    assert SECRET not in (run_dir / "journal.jsonl").read_text()


def test_a_long_reason_is_cut(tmp_path: Path) -> None:
    work = sample_copy("invoice", tmp_path)
    flag = {"name": "flag_for_human", "arguments": {"reason": "impossible " * 2000}}
    proc = _run(work, tmp_path, [{"tool_calls": [flag]}, {"text": "unused"}])

    assert proc.returncode == 5, proc.stderr
    reason = json.loads(proc.stdout)["reason"]
    assert len(reason) < 2_500 and "more characters]" in reason


def test_a_template_without_it_does_not_offer_it(tmp_path: Path) -> None:
    work = sample_copy("invoice", tmp_path)
    template = tmp_path / "team.yaml"
    template.write_text(
        "looprun: 1\nname: team\nextends: bugfix\n"
        "act:\n  tools: [read_file, write_file, edit_file, list_files, search, run]\n"
    )
    proc = _run(work, tmp_path, [{"tool_calls": [FLAG]}, {"text": "I give up."}], str(template))

    summary = json.loads(proc.stdout)
    assert summary["outcome"] != "escalated" and summary["code"] != "flag_for_human"
    assert proc.returncode != 5, proc.stderr
    run_dir = Path(summary["run_dir"])
    (call,) = [e for e in _events(run_dir, "tool_call") if e["tool"] == "flag_for_human"]
    assert call["is_error"] and "not enabled here" in call["result"]
