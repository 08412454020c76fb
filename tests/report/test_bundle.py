"""A run paused for approval in one clone, bundled, and resumed in another real clone."""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path

from tests.report.runs import SCRIPT, TEMPLATE, TEST
from tests.support.cli import looprun
from tests.support.git_repos import git_repo

# the same loop, but a change under src/ waits for a person
GATED = TEMPLATE.replace(
    '    paths: {allow: ["src/**", "tests/**"]}\n',
    '    paths: {allow: ["src/**", "tests/**"]}\n    approve: {paths: ["src/**"]}\n',
)


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout


def _origin(tmp: Path) -> Path:
    """The repository both clones come from: the buggy code, its test, the template and
    the scripted model, all committed (as a team keeps its loops in the repository)."""
    repo = tmp / "origin"
    (repo / "src").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "loops").mkdir()
    (repo / "src" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "tests" / "test_calc.py").write_text(TEST)
    (repo / "loops" / "mini.yaml").write_text(GATED)
    (repo / "loops" / "script.yaml").write_text(SCRIPT)
    return git_repo(repo)


def test_paused_run_resumes_in_another_clone(tmp_path: Path) -> None:
    origin = _origin(tmp_path)
    first = tmp_path / "job1"
    second = tmp_path / "job2"
    _git(tmp_path, "clone", "-q", str(origin), str(first))
    _git(tmp_path, "clone", "-q", str(origin), str(second))

    paused = looprun(
        "loops/mini.yaml", "--intent", "add() subtracts", "--model", "script:loops/script.yaml",
        "--json", cwd=first,
    )  # fmt: skip
    assert paused.returncode == 5, paused.stderr
    summary = json.loads(paused.stdout)
    run_id = summary["run_id"]
    assert summary["state"]["pending_approvals"] == ["src/calc.py"]

    bundle = tmp_path / "transfer" / "run.looprun"
    made = looprun("bundle", run_id, "--output", str(bundle), cwd=first)
    assert made.returncode == 0, made.stderr
    with tarfile.open(bundle) as tar:
        names = tar.getnames()
    assert {"manifest.json", "refs.bundle", "run/journal.jsonl", "run/state.json"} <= set(names)

    # the second clone knows nothing of the run until it is unpacked
    assert not (second / ".looprun").exists()
    resumed = looprun("resume", "--bundle", str(bundle), "--approve", "--json", cwd=second)
    assert resumed.returncode == 0, resumed.stderr
    done = json.loads(resumed.stdout)
    assert (done["outcome"], done["run_id"], done["iterations"]) == ("done", run_id, 2)
    assert f"unpacked run {run_id}" in resumed.stderr
    assert (second / "src" / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    # paths inside the first clone now point into the second
    invocation = json.loads((second / ".looprun" / "runs" / run_id / "run.json").read_text())
    assert invocation["workdir"] == str(second.resolve())
    assert invocation["template"] == str((second / "loops" / "mini.yaml").resolve())
    # the first clone is untouched by what happened in the second
    assert (first / "src" / "calc.py").read_text().endswith("return a * b\n")

    # the whole story, diffs included, is readable in the second clone
    report = json.loads(looprun("report", run_id, "--format", "json", cwd=second).stdout)
    assert [it["decision"] for it in report["iterations"]] == ["retry", "done"]
    assert "+    return a * b" in report["iterations"][0]["diff"]
    assert "+    return a + b" in report["iterations"][1]["diff"]
    assert any(e.startswith("approval approved") for e in report["events"])

    again = looprun("resume", "--bundle", str(bundle), cwd=second)
    assert again.returncode == 2 and f"run {run_id} is already in" in again.stderr


def test_bundle_errors_are_clear(tmp_path: Path) -> None:
    origin = _origin(tmp_path)
    other = git_repo(tmp_path / "unrelated")
    (other / "x.txt").write_text("x\n")
    _git(other, "add", "x.txt")
    _git(other, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    paused = looprun(
        "loops/mini.yaml", "--intent", "add() subtracts", "--model", "script:loops/script.yaml",
        "--json", cwd=origin,
    )  # fmt: skip
    run_id = json.loads(paused.stdout)["run_id"]
    bundle = tmp_path / "b.looprun"
    assert looprun("bundle", run_id, "-o", str(bundle), cwd=origin).returncode == 0
    lacking = looprun("resume", "--bundle", str(bundle), cwd=other)
    assert lacking.returncode == 1 and "this clone lacks commit" in lacking.stderr
    assert not (other / ".looprun" / "runs").exists()  # nothing half-unpacked
    junk = tmp_path / "junk.looprun"
    junk.write_text("not a tar")
    bad = looprun("resume", "--bundle", str(junk), cwd=other)
    assert bad.returncode == 2 and "not a looprun bundle" in bad.stderr
    missing = looprun("bundle", "nope", cwd=origin)
    assert missing.returncode == 2 and "no run 'nope'" in missing.stderr
    for proc in (lacking, bad, missing):
        assert "Traceback" not in proc.stderr
