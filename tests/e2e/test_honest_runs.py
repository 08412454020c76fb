"""Runs that must not end with a false green or a false red, through the real CLI on a
real project (the invoice sample, or a small repository written here): the baseline,
protected tests, no-progress detection on by default, observers that edit the tree,
report files, and a working tree that is dirty at the start."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import yaml
from e2e_helpers import git_init, looprun, sample_copy

INTENT = "summary() crashes with ZeroDivisionError when every line of an invoice is cancelled"
REPRODUCE = {
    "tool_calls": [
        {
            "name": "write_file",
            "arguments": {
                "path": "tests/test_cancelled_lines.py",
                "content": (
                    "from invoice.totals import Line, summary\n\n\n"
                    "def test_only_cancelled_lines():\n"
                    '    assert summary([Line("cancelled", 0, 1250)])["total"] == 0\n'
                ),
            },
        }
    ]
}
FIX = {
    "tool_calls": [
        {
            "name": "edit_file",
            "arguments": {
                "path": "invoice/totals.py",
                "old": "    units = sum(line.quantity for line in lines)\n",
                "new": (
                    "    units = sum(line.quantity for line in lines)\n"
                    "    if units == 0:\n        return 0\n"
                ),
            },
        }
    ]
}


def _script(tmp: Path, turns: list[dict[str, Any]]) -> Path:
    """One act turn per item: a tool call is followed by the model's closing words."""
    calls: list[dict[str, Any]] = []
    for turn in turns:
        calls.append(turn)
        if "tool_calls" in turn:
            calls.append({"text": "Done with this step."})
    path = tmp / "script.yaml"
    path.write_text(yaml.safe_dump(calls, sort_keys=False))
    return path


def _run(template: str, work: Path, script: Path, *extra: str) -> tuple[Any, dict[str, Any]]:
    proc = looprun(
        template,
        "--intent",
        INTENT,
        "--workdir",
        str(work),
        "--model",
        f"script:{script}",
        "--json",
        *extra,
        timeout=900,
    )
    assert proc.stdout.strip(), proc.stderr
    return proc, json.loads(proc.stdout)


def _events(summary: dict[str, Any], kind: str | None = None) -> list[dict[str, Any]]:
    lines = (Path(summary["run_dir"]) / "journal.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if kind is None or e["event"] == kind]


def _commit(work: Path, message: str) -> None:
    for args in (["add", "-A"], ["commit", "-qm", message]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=work, check=True
        )


def test_a_failure_already_there_neither_reproduces_nor_blocks_the_fix(tmp_path: Path) -> None:
    work = sample_copy("invoice", tmp_path)
    (work / "tests" / "test_known.py").write_text("def test_known_gap():\n    assert 1 == 2\n")
    _commit(work, "a known failing test")
    # untracked work of the user's, present at the start
    (work / "notes.txt").write_text("remember the VAT change\n")
    (work / "tests" / "test_scratch.py").write_text("def test_scratch():\n    assert True\n")
    turns = [{"text": "The failing test_known_gap already shows the bug."}, REPRODUCE, FIX]
    proc, summary = _run("bugfix", work, _script(tmp_path, turns))

    assert (summary["outcome"], summary["iterations"]) == ("done", 3), proc.stderr
    # the start says what the base holds besides HEAD
    (start,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("start: ")]
    assert "untracked" in start and "notes.txt" in start, start
    # one baseline observation, before the first iteration, recorded in the journal
    kinds = [e["event"] for e in _events(summary)]
    assert kinds.count("baseline") == 1 and kinds.index("baseline") < kinds.index("iteration")
    baseline = json.loads((Path(summary["run_dir"]) / "observe" / "0.json").read_text())
    assert "tests/test_known.py::test_known_gap" in baseline["observers"]["tests"]["failing"]
    # 1: the old failure does not complete `reproduce`
    first, second, third = (e["decision"] for e in _events(summary, "iteration"))
    assert first["action"] == "retry" and "do not count" in first["message"]
    assert "test_known_gap" in first["message"]
    # 2: the new test (written beside untracked files) is seen in the diff: done
    assert second["action"] == "done"
    # 3: fixed, although test_known_gap still fails as it did at the start
    assert third["action"] == "done"
    assert sorted(summary["changed_files"]) == [
        "invoice/totals.py",
        "tests/test_cancelled_lines.py",
    ]


def test_checks_that_cannot_run_stop_before_any_model_call(tmp_path: Path) -> None:
    work = sample_copy("invoice", tmp_path)
    (work / "tests" / "test_rates.py").write_text(
        "from invoice._generated_rates import RATES\n\n\ndef test_rates():\n    assert RATES\n"
    )
    _commit(work, "tests that need a generated module")
    proc, summary = _run("bugfix", work, _script(tmp_path, [REPRODUCE, FIX]))

    assert proc.returncode == 1, proc.stderr
    assert (summary["outcome"], summary["code"], summary["iterations"]) == (
        "error",
        "baseline_unusable",
        0,
    )
    assert "observer 'tests'" in summary["reason"] and "exited 2" in summary["reason"]
    assert "_generated_rates" in summary["reason"] and "No model was called" in summary["reason"]
    assert summary["usage"]["prompt_tokens"] == 0
    assert not [e for e in _events(summary) if e["event"] in ("plan", "tool_call", "iteration")]
    assert not (work / "tests" / "test_cancelled_lines.py").exists()


GEN_TEST = "from gen import numbers\n\n\ndef test_numbers():\n    assert numbers() == [0, 1, 2]\n"
WRONG = "def numbers():\n    return (i for i in range(3))\n"


def _plain_template(
    tmp: Path, observe: dict[str, Any], limits: str = "{max_iterations: 6}"
) -> Path:
    path = tmp / "plain.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            looprun: 1
            name: plain
            observe: {json.dumps(observe)}
            act: {{prompt: "Fix: {{{{ intent }}}}"}}
            exit: [{", ".join(f"{n}.ok" for n in observe)}]
            limits: {limits}
            """
        )
    )
    return path


def test_the_same_wrong_edit_without_a_refine_tree_ends_stalled(tmp_path: Path) -> None:
    work = tmp_path / "gen"
    work.mkdir()
    (work / "gen.py").write_text("def numbers():\n    return None\n")
    (work / "test_gen.py").write_text(GEN_TEST)
    git_init(work)
    # the report is written into the working tree: it is never one of the run's changes
    tests = {
        "run": "python -m pytest -q -p no:cacheprovider --junitxml=.junit.xml",
        "parser": "junit",
        "file": ".junit.xml",
    }
    template = _plain_template(tmp_path, {"tests": tests})
    edit = {
        "tool_calls": [{"name": "write_file", "arguments": {"path": "gen.py", "content": WRONG}}]
    }
    proc, summary = _run(str(template), work, _script(tmp_path, [edit] * 6))

    # no `max_repeats` in the template: detection is on by default (3)
    assert (summary["outcome"], summary["code"], summary["iterations"]) == (
        "stalled",
        "max_repeats",
        3,
    ), proc.stderr
    # pytest prints the generator through a shortened repr whose address changes from run
    # to run; the no-progress fingerprint masks it, so the same failure counts as a repeat
    records = [
        json.loads((Path(summary["run_dir"]) / "observe" / f"{n}.json").read_text())
        for n in (1, 2, 3)
    ]
    messages = [r["observers"]["tests"]["items"][0]["message"] for r in records]
    assert all("<generator o" in m for m in messages), messages
    assert len({r["observers"]["tests"]["signature"] for r in records}) == 1
    assert [r["progress"]["repeats"] for r in records] == [1, 2, 3]
    assert summary["state"]["changed_files"] == ["gen.py"]  # never .junit.xml
    assert (work / ".junit.xml").is_file()


def test_detection_turned_off_runs_to_the_iteration_cap(tmp_path: Path) -> None:
    work = tmp_path / "gen"
    work.mkdir()
    (work / "gen.py").write_text("def numbers():\n    return None\n")
    (work / "test_gen.py").write_text(GEN_TEST)
    git_init(work)
    tests = {"run": "python -m pytest -q -p no:cacheprovider", "parser": "exit_code"}
    template = _plain_template(
        tmp_path, {"tests": tests}, "{max_iterations: 4, max_repeats: false}"
    )
    edit = {
        "tool_calls": [{"name": "write_file", "arguments": {"path": "gen.py", "content": WRONG}}]
    }
    proc, summary = _run(str(template), work, _script(tmp_path, [edit] * 4))
    assert (summary["outcome"], summary["code"], summary["iterations"]) == (
        "exhausted",
        "max_iterations",
        4,
    ), proc.stderr


def test_an_observer_that_fixes_the_tree_is_reported_and_undone(tmp_path: Path) -> None:
    work = tmp_path / "lib"
    work.mkdir()
    (work / "pyproject.toml").write_text("[tool.ruff]\nfix = true\n")
    (work / "lib.py").write_text("def one():\n    return 1\n")
    git_init(work)
    # the team's own lint observer, without --no-fix: the project's `fix = true` applies
    lint = {
        "run": "ruff check --output-format=sarif --output-file={{ run.artifacts }}/ruff.sarif .",
        "parser": "sarif",
        "file": "{{ run.artifacts }}/ruff.sarif",
    }
    template = _plain_template(tmp_path, {"lint": lint})
    code = "import os\n\n\ndef two():\n    return 2\n"
    edit = {
        "tool_calls": [{"name": "write_file", "arguments": {"path": "two.py", "content": code}}]
    }
    proc, summary = _run(str(template), work, _script(tmp_path, [edit]))

    assert proc.returncode == 1, proc.stderr
    assert (summary["outcome"], summary["code"]) == ("error", "observer_changed_tree")
    assert "observer 'lint'" in summary["reason"] and "two.py" in summary["reason"]
    assert "--no-fix" in summary["reason"]
    # the model's file is as the model wrote it: the observer's edit was undone
    assert (work / "two.py").read_text() == code
    record = json.loads((Path(summary["run_dir"]) / "observe" / "1.json").read_text())
    assert record["observers"]["lint"]["ok"] is False


def test_the_python_pack_lints_without_fixing(tmp_path: Path) -> None:
    from looprun.template.loader import load_template

    template = load_template("bugfix")
    assert "--no-fix" in template.observe["lint"].run.source
    assert template.observe["tests"].cannot_run_exit == (2, 3, 4)


# The honest exit: a model that finds the task cannot be done as asked calls
# flag_for_human, and the run ends escalated with its reason, never done. The reason is
# model output: shown as written (never rendered as a template), redacted, bounded.
SECRET = "sk-honest-exit-0123456789abcdef"
REASON = "Totals of cancelled lines must be both 0 and 1250: contradictory. {{ 7 * 7 }} {% raw %}"


def _flag(reason: str) -> dict[str, Any]:
    return {"name": "flag_for_human", "arguments": {"reason": reason}}


def test_flag_for_human_ends_the_run_escalated_with_the_reason(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("HONEST_EXIT_API_KEY", SECRET)  # a secret the run's output must hide
    work = sample_copy("invoice", tmp_path)
    write = {"name": "write_file", "arguments": {"path": "after_flag.txt", "content": "x"}}
    # the flag and a write in the same reply: the write after the flag is not run
    turn = {"tool_calls": [_flag(f"{REASON} key={SECRET}"), write]}
    proc, summary = _run("bugfix", work, _script(tmp_path, [turn]), "--max-iterations", "2")

    assert proc.returncode == 5, proc.stderr
    assert (summary["outcome"], summary["code"]) == ("escalated", "flag_for_human")
    reason = summary["reason"]
    assert "must be both 0 and 1250" in reason and "must be both 0 and 1250" in proc.stderr
    assert "{{ 7 * 7 }} {% raw %}" in reason  # data, never rendered
    assert SECRET not in proc.stdout + proc.stderr and "[redacted]" in reason
    assert not (work / "after_flag.txt").exists()
    run_dir = Path(summary["run_dir"])
    report = looprun("report", str(run_dir), "--format", "md")
    assert report.returncode == 0, report.stderr
    assert "must be both 0 and 1250" in report.stdout and SECRET not in report.stdout
    assert SECRET not in (run_dir / "journal.jsonl").read_text()


def test_a_long_flag_reason_is_cut(tmp_path: Path) -> None:
    work = sample_copy("invoice", tmp_path)
    turn = {"tool_calls": [_flag("impossible " * 2000)]}
    proc, summary = _run("bugfix", work, _script(tmp_path, [turn]))

    assert proc.returncode == 5, proc.stderr
    assert len(summary["reason"]) < 2_500 and "more characters]" in summary["reason"]


def test_a_template_without_flag_for_human_does_not_offer_it(tmp_path: Path) -> None:
    work = sample_copy("invoice", tmp_path)
    template = tmp_path / "team.yaml"
    template.write_text(
        "looprun: 1\nname: team\nextends: bugfix\n"
        "act:\n  tools: [read_file, write_file, edit_file, list_files, search, run]\n"
    )
    turn = {"tool_calls": [_flag(REASON)]}
    proc, summary = _run(str(template), work, _script(tmp_path, [turn]), "--max-iterations", "1")

    assert proc.returncode != 5 and summary["code"] != "flag_for_human", proc.stderr
    (call,) = [e for e in _events(summary, "tool_call") if e["tool"] == "flag_for_human"]
    assert call["is_error"] and "not enabled here" in call["result"]
