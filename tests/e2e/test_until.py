"""``looprun --until CMD --intent TEXT`` through the real CLI, on a real package from
PyPI with a bug planted, driven by a scripted model: a loop with no template file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_helpers import git_init, journal_events, looprun, run_dirs, summary_of
from real_package import BUG, edit_turns, planted_project, write_call

CHECK = "python -m pytest -q -p no:cacheprovider test_inflection.py"
INTENT = "ordinal() gives 'rd' for 113 and 13; numbers ending in 11, 12 and 13 take 'th'."
CODE = "inflection/__init__.py"
FIX = edit_turns(CODE, BUG[1], BUG[0], "Fixed: 13 takes 'th'.")


def _call(
    work: Path, turns: list[dict[str, Any]], *extra: str, check: str = CHECK, **kw: Any
) -> Any:
    script = work.parent / "script.yaml"
    script.write_text(yaml.safe_dump(turns, sort_keys=False))
    return looprun(
        "--until", check, "--intent", INTENT, "--workdir", str(work),
        "--model", f"script:{script}", "--json", *extra, timeout=600, **kw,
    )  # fmt: skip


def _until(
    work: Path, turns: list[dict[str, Any]], *extra: str, check: str = CHECK
) -> tuple[dict[str, Any], Any]:
    proc = _call(work, turns, *extra, check=check)
    summary = summary_of(proc)
    assert proc.returncode == summary["exit_code"], proc.stderr
    return summary, proc


def _saved_run(work: Path, saved: Path, turns: list[dict[str, Any]]) -> dict[str, Any]:
    script = work.parent / "script.yaml"
    script.write_text(yaml.safe_dump(turns, sort_keys=False))
    proc = looprun(
        str(saved), "--intent", INTENT, "--workdir", str(work),
        "--model", f"script:{script}", "--json", timeout=600,
    )  # fmt: skip
    return summary_of(proc)


def test_a_planted_bug_is_fixed_and_the_check_decides_done(sdist: Path, tmp_path: Path) -> None:
    work = planted_project(sdist, tmp_path)
    summary, _ = _until(work, FIX)
    assert summary["outcome"] == "done" and summary["exit_code"] == 0
    assert summary["iterations"] == 1
    assert BUG[0] in (work / CODE).read_text()
    # the template the run read is kept in the run state, and the check is its observer
    (kept,) = (work / ".looprun" / "until").glob("*.yaml")
    assert yaml.safe_load(kept.read_text())["inputs"]["check"]["default"] == CHECK


def test_the_failing_check_output_is_the_feedback(sdist: Path, tmp_path: Path) -> None:
    work = planted_project(sdist, tmp_path)
    summary, _ = _until(work, [{"text": "looking"}, *FIX])
    assert summary["outcome"] == "done" and summary["iterations"] == 2
    lines = (Path(summary["run_dir"]) / "exchanges.jsonl").read_text().splitlines()
    second = next(e for e in map(json.loads, lines) if e["iteration"] == 2)
    said = "\n".join(str(m.get("content", "")) for m in second["request"])
    # pytest's own summary, bounded
    assert "failed" in said and "test_ordinalize[113-113th]" in said


def test_a_check_that_never_passes_ends_exhausted(sdist: Path, tmp_path: Path) -> None:
    work = planted_project(sdist, tmp_path)
    turns = []
    for i in range(4):  # a different, useless change each time: not a repeat
        turns += [{"tool_calls": [write_call(f"notes_{i}.txt", f"try {i}\n")]}, {"text": "tried"}]
    summary, _ = _until(work, turns, "--max-iterations", "3")
    assert summary["outcome"] == "exhausted" and summary["exit_code"] == 3
    assert summary["iterations"] == 3


def test_the_same_attempt_again_and_again_ends_stalled(sdist: Path, tmp_path: Path) -> None:
    work = planted_project(sdist, tmp_path)
    summary, _ = _until(work, [{"text": "I think it is fine."}] * 8)
    assert summary["outcome"] == "stalled" and summary["exit_code"] == 4


@pytest.mark.parametrize(
    "path, content",
    [
        ("test_inflection.py", "def test_nothing():\n    pass\n"),  # the file CMD names
        ("conftest.py", "import inflection\ninflection.ordinal = lambda n: 'th'\n"),
        ("setup.cfg", "[tool:pytest]\naddopts = -k nothing_at_all\n"),
        ("test_zz_patch.py", "import inflection\ninflection.ordinal = lambda n: 'th'\n"),
    ],
)
def test_a_cheat_on_the_check_never_ends_done(
    sdist: Path, tmp_path: Path, path: str, content: str
) -> None:
    work = planted_project(sdist, tmp_path)
    before = (work / path).read_text() if (work / path).exists() else None
    turns = [{"tool_calls": [write_call(path, content)]}, {"text": "All green now."}] * 3
    summary, _ = _until(work, turns, "--max-iterations", "3")
    assert summary["outcome"] != "done" and summary["exit_code"] != 0
    violations = [e["rule"] for e in journal_events(summary["run_dir"], "policy_violation")]
    assert "path.protected" in violations, violations
    now = (work / path).read_text() if (work / path).exists() else None
    assert now == before  # rolled back


def test_protect_adds_paths_the_run_may_not_change(sdist: Path, tmp_path: Path) -> None:
    work = planted_project(sdist, tmp_path)
    readme = (work / "README.rst").read_text()
    turns = [{"tool_calls": [write_call("README.rst", "gone\n")]}, {"text": "ok"}, *FIX]
    summary, _ = _until(work, turns, "--protect", "*.rst")
    assert summary["outcome"] == "done" and summary["iterations"] == 2
    assert (work / "README.rst").read_text() == readme


def test_the_saved_template_validates_and_runs_the_same(sdist: Path, tmp_path: Path) -> None:
    saved = tmp_path / "loops" / "ordinal.yaml"
    saved.parent.mkdir()
    turns = [{"text": "looking"}, *FIX]
    work = planted_project(sdist, tmp_path / "a")
    first, _ = _until(work, turns, "--save", str(saved))
    proc = looprun("validate", str(saved))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    again = _saved_run(planted_project(sdist, tmp_path / "b"), saved, turns)
    for key in ("outcome", "exit_code", "iterations"):
        assert again[key] == first[key]
    assert first["outcome"] == "done"
    # never over an existing file: refused before the run, the file as it was
    text = saved.read_text()
    proc = looprun(
        "--until", CHECK, "--intent", INTENT, "--workdir", str(work), "--save", str(saved)
    )
    assert proc.returncode == 2 and "already exists" in proc.stderr
    assert "Traceback" not in proc.stderr and saved.read_text() == text


def test_braces_in_the_command_and_intent_stay_data(tmp_path: Path) -> None:
    work = tmp_path / "repo"
    work.mkdir()
    (work / ".gitignore").write_text(".looprun/\n")
    (work / "check.py").write_text("import sys\nprint(sys.argv[1])\nsys.exit(1)\n")
    git_init(work)
    check = "python check.py '{{ 7 * 7 }}{% if 1 %}x{% endif %}'"
    script = tmp_path / "s.yaml"
    script.write_text(json.dumps([{"text": "hm"}] * 4))
    proc = looprun(
        "--until", check, "--intent", "say {{ 6 * 7 }} {% raw %}", "--workdir", str(work),
        "--model", f"script:{script}", "--json", "--max-iterations", "2",
    )  # fmt: skip
    summary = summary_of(proc)
    assert summary["outcome"] in ("exhausted", "stalled"), proc.stderr
    lines = (Path(summary["run_dir"]) / "exchanges.jsonl").read_text().splitlines()
    said = "\n".join(
        str(m.get("content", "")) for e in map(json.loads, lines) for m in e["request"]
    )
    assert "{{ 7 * 7 }}{% if 1 %}x{% endif %}" in said and "49" not in said
    assert "say {{ 6 * 7 }} {% raw %}" in said and "42" not in said
    # check.py is named by the command: read-only
    kept = next((work / ".looprun" / "until").glob("*.yaml")).read_text()
    assert "/check.py" in yaml.safe_load(kept)["act"]["constraints"]["protect"]["paths"]


@pytest.mark.parametrize(
    "args, said",
    [
        (["bugfix", "--until", "true", "--intent", "x"], "not both"),
        (["run", "--intent", "x"], "give a TEMPLATE to run, or --until CMD"),
        (["bugfix", "--intent", "x", "--save", "t.yaml"], "--save goes with --until"),
        (["--until", "", "--intent", "x"], "the check command is empty"),
        (["--until", "pytest 'unclosed", "--intent", "x"], "cannot read the command"),
    ],
)
def test_usage_errors(tmp_path: Path, args: list[str], said: str) -> None:
    (tmp_path / "f").write_text("x\n")
    git_init(tmp_path)
    proc = looprun(*args, "--workdir", str(tmp_path), "--model", "script:/dev/null")
    assert proc.returncode == 2, proc.stderr
    assert said in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "t.yaml").exists()


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_under_a_required_sandbox(sdist: Path, tmp_path: Path) -> None:
    work = planted_project(sdist, tmp_path)
    summary, proc = _until(work, FIX, "--sandbox", "required")
    if summary["exit_code"] == 2 and "sandbox" in proc.stderr:
        pytest.skip(f"bubblewrap cannot run here: {proc.stderr.strip()[-300:]}")
    assert summary["outcome"] == "done", proc.stderr


def test_a_rewritten_kept_template_is_refused_on_resume(sdist: Path, tmp_path: Path) -> None:
    """The kept template is a file in the workdir that a command could rewrite (to a check
    that passes whatever the code does): resume refuses it, and goes on only with the one
    the run recorded, restored, to the same verdict."""
    work = planted_project(sdist, tmp_path)
    killed = _call(work, [{"text": "looking"}, *FIX], env={"LOOPRUN_CRASH_AT": "after:state"})
    assert killed.returncode == -9, killed.stderr
    (kept,) = (work / ".looprun" / "until").glob("*.yaml")
    honest = kept.read_text()
    forged = yaml.safe_load(honest)
    forged["inputs"]["check"]["default"] = "true"
    kept.write_text(yaml.safe_dump(forged, sort_keys=False))
    (run_dir,) = run_dirs(work)
    refused = looprun("resume", run_dir.name, "--workdir", str(work), "--json", timeout=600)
    assert refused.returncode == 2, refused.stderr
    assert "the template changed since run" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert BUG[1] in (work / CODE).read_text()  # nothing ran on the forged check
    kept.write_text(honest)
    resumed = looprun("resume", run_dir.name, "--workdir", str(work), "--json", timeout=600)
    summary = summary_of(resumed)
    assert summary["outcome"] == "done", resumed.stderr
    assert BUG[0] in (work / CODE).read_text()
