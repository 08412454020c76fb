"""looprun in CI: the intent from a file or stdin, the step summary, and annotations."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.report.runs import make_project, real_run
from tests.support.cli import cli_env, looprun


def test_step_summary_gets_the_markdown_report(tmp_path: Path) -> None:
    summary = tmp_path / "step-summary.md"
    summary.write_text("# earlier step\n")
    repo, run_id, _ = real_run(tmp_path, env={"GITHUB_STEP_SUMMARY": str(summary)})
    text = summary.read_text()
    assert text.startswith("# earlier step\n## looprun mini: ✅ done after 2 iteration(s)")
    assert f"Run `{run_id}`" in text and "### Timeline" in text
    assert text == "# earlier step\n" + looprun("report", run_id, cwd=repo).stdout + "\n"


def test_an_unwritable_step_summary_is_a_warning_not_a_failure(tmp_path: Path) -> None:
    _, _, err = real_run(tmp_path, env={"GITHUB_STEP_SUMMARY": str(tmp_path)})  # a directory
    assert "warning: could not append the report to GITHUB_STEP_SUMMARY" in err


def test_intent_from_stdin_is_data(tmp_path: Path) -> None:
    repo, template, script = make_project(tmp_path)
    intent = "add() subtracts {{ 7 * 7 }} $(touch pwned) `id`\n\nsecond paragraph\n"
    proc = subprocess.run(
        [sys.executable, "-m", "looprun", str(template), "--intent-file", "-",
         "--model", f"script:{script}", "--json"],
        input=intent, capture_output=True, text=True, cwd=repo, env=cli_env(), timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    run_dir = Path(json.loads(proc.stdout)["run_dir"])
    assert json.loads((run_dir / "run.json").read_text())["intent"] == intent.strip()
    first = json.loads((run_dir / "exchanges.jsonl").read_text().splitlines()[0])
    assert intent.strip() in first["request"][-1]["content"]  # verbatim: never rendered
    assert not (repo / "pwned").exists()


def test_intent_file_errors_are_clear(tmp_path: Path) -> None:
    repo, template, script = make_project(tmp_path)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"caf\xe9\n")
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n")
    cases = [
        (["--intent-file", str(tmp_path / "missing.txt")], "missing.txt: no such file"),
        (["--intent-file", str(bad)], "bad.txt: not UTF-8 text (byte 3"),
        (["--intent-file", str(empty)], "empty.txt: the intent is empty"),
        (["--intent-file", str(empty), "--intent", "x"], "give the intent once"),
    ]
    for args, message in cases:
        proc = looprun(str(template), *args, "--model", f"script:{script}", cwd=repo)
        assert proc.returncode == 2 and message in proc.stderr, (args, proc.stderr)
        assert "Traceback" not in proc.stderr
    assert not (repo / ".looprun" / "runs").exists()  # no run was started


def test_validate_annotates_problems_in_github_actions(tmp_path: Path) -> None:
    loops = tmp_path / "loops"
    loops.mkdir()
    (loops / "good.yaml").write_text(make_template_text())
    (loops / "bad.yaml").write_text(
        make_template_text().replace("exit: [tests.ok]", "exit: [tests.okk, 'a,b:c']")
    )
    env = {"GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(tmp_path)}
    proc = looprun("validate", "loops/good.yaml", "loops/bad.yaml", cwd=tmp_path, env=env)
    assert proc.returncode == 2
    lines = proc.stdout.splitlines()
    notes = [ln for ln in lines if ln.startswith("::error ")]
    assert notes and all(ln.startswith("::error file=loops/bad.yaml,line=") for ln in notes)
    plain = [ln for ln in lines if ln.startswith("loops/bad.yaml:")]
    assert len(plain) == len(notes)  # each problem once as text, once as an annotation
    first = plain[0].split(":", 3)
    assert notes[0].startswith(f"::error file=loops/bad.yaml,line={first[1]},col={first[2]}::")
    assert "has no fact 'okk'" in notes[0]
    # outside GitHub Actions: no workflow commands
    quiet = looprun("validate", "loops/bad.yaml", cwd=tmp_path, env={"GITHUB_ACTIONS": ""})
    assert "::error" not in quiet.stdout and quiet.returncode == 2


def test_annotation_escapes_workflow_command_syntax() -> None:
    from looprun.cli.validation.github import annotation
    from looprun.errors import Location, Problem

    p = Problem(Location("a,b:c.yaml", 3, 0), "50% wrong\nsecond line")
    assert annotation(p) == "::error file=a%2Cb%3Ac.yaml,line=3,col=1::50%25 wrong%0Asecond line"


def make_template_text() -> str:
    from tests.report.runs import TEMPLATE

    return TEMPLATE
