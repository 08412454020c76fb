"""The published pre-commit hooks, applied the way pre-commit applies them (each hook's
`files` regex searched in every staged path, then its `entry` with the matching paths) to
a team repository that also holds a Helm chart: the chart is left alone, broken templates
and failing cases refuse the commit, and the README's `rev:` is this version's tag."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import yaml

from looprun import __version__

ROOT = Path(__file__).resolve().parent
REPO = ROOT.parent
HOOKS = {h["id"]: h for h in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())}

TEAM_FILES = {
    "chart/templates/deployment.yaml": """\
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: "{{ .Release.Name }}"}
        """,
    "chart/values.yaml": "replicaCount: 1\n",
    ".github/workflows/ci.yaml": "on: [push]\njobs: {}\n",
    "loops/payments-bugfix.yaml": """\
        looprun: 1
        name: payments-bugfix
        extends: bugfix
        limits: {max_iterations: 6}
        """,
    "loops/payments-bugfix.cases.yaml": """\
        template: payments-bugfix.yaml
        cases:
          - name: a green suite finishes the fix task
            task: fix
            expect: {action: done, exit: true}
        """,
}


def _run_hook(hook_id: str, repo: Path, staged: list[str]) -> subprocess.CompletedProcess[str]:
    hook = HOOKS[hook_id]
    files = [f for f in staged if re.search(hook["files"], f)]
    entry = shlex.split(hook["entry"])
    assert entry[0] == "looprun"
    return subprocess.run(
        [sys.executable, "-m", "looprun", *entry[1:], *files],
        capture_output=True,
        text=True,
        cwd=repo,
        timeout=300,
    )


def _layout(tmp_path: Path) -> list[str]:
    for name, text in TEAM_FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text), encoding="utf-8")
    return sorted(TEAM_FILES)


def test_validate_hook_checks_looprun_files_and_leaves_a_helm_chart_alone(tmp_path: Path) -> None:
    staged = _layout(tmp_path)
    ok = _run_hook("looprun-validate", tmp_path, staged)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout == ""  # --quiet: only problems are printed
    (tmp_path / "loops/payments-bugfix.yaml").write_text(
        "looprun: 1\nname: payments-bugfix\nextends: bugfix\nlimits: {max_iteration: 6}\n"
    )
    bad = _run_hook("looprun-validate", tmp_path, staged)
    assert bad.returncode == 2
    assert "loops/payments-bugfix.yaml:4:10: unknown key 'max_iteration' in limits" in bad.stdout
    assert "chart" not in bad.stdout and ".github" not in bad.stdout


def test_test_hook_runs_each_case_file_against_its_template(tmp_path: Path) -> None:
    staged = _layout(tmp_path)
    assert [f for f in staged if re.search(HOOKS["looprun-test"]["files"], f)] == [
        "loops/payments-bugfix.cases.yaml"
    ]
    ok = _run_hook("looprun-test", tmp_path, staged)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "1 passed, 0 failed" in ok.stdout
    cases = tmp_path / "loops/payments-bugfix.cases.yaml"
    cases.write_text(cases.read_text().replace("action: done", "action: retry"))
    bad = _run_hook("looprun-test", tmp_path, staged)
    assert bad.returncode == 1
    assert "action: expected retry, got done" in bad.stdout


def test_readme_rev_is_this_version_and_names_both_hooks() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    revs = re.findall(r"^\s*rev:\s*(\S+)", readme, re.M)
    assert revs == [f"v{__version__}"]  # the release tag cut from this version
    block = readme.split("rev:", 1)[1].split("```", 1)[0]
    hooks = re.findall(r"^\s*- id:\s*(\S+)", block, re.M)
    assert set(hooks) == set(HOOKS)
