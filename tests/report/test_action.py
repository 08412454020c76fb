"""The composite GitHub Action, run locally: action.yml is parsed, and each step's
``run:`` script is executed with bash as the runner does (``bash --noprofile --norc -eo
pipefail``), with its ``env`` and ``working-directory`` expressions filled from the
inputs and the GITHUB_* files set to temporary files. The install step really installs
this repository into a fresh virtual environment."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.report.runs import HOSTILE, make_project

REPO = Path(__file__).resolve().parents[2]
EXPR = re.compile(r"\$\{\{\s*([\w.-]+)\s*\}\}")


def _action() -> dict[str, Any]:
    return yaml.safe_load((REPO / "action.yml").read_text())


def _render(value: str, context: dict[str, str]) -> str:
    def lookup(m: re.Match[str]) -> str:
        assert m.group(1) in context, f"unknown expression {m.group(0)}"
        return context[m.group(1)]

    return EXPR.sub(lookup, str(value))


def _kv_file(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        if "=" in line:
            key, _, value = line.partition("=")
            out[key] = value
    return out


class Runner:
    """Just enough of a GitHub runner to execute a composite action's steps."""

    def __init__(self, tmp: Path):
        self.temp = tmp / "runner-temp"
        self.temp.mkdir()
        self.env_file = tmp / "github_env"
        self.summary = tmp / "step_summary.md"
        for f in (self.env_file, self.summary):
            f.write_text("")
        self.exported: dict[str, str] = {}

    def run(
        self, inputs: dict[str, str], steps: list[dict[str, Any]], cwd: Path
    ) -> tuple[int, dict[str, str]]:
        spec = _action()
        values = {k: str(v.get("default", "")) for k, v in spec["inputs"].items()}
        values.update(inputs)
        context = {f"inputs.{k}": v for k, v in values.items()}
        context["github.action_path"] = str(REPO)
        output = (
            self.temp.parent
            / f"github_output_{len(list(self.temp.parent.glob('github_output_*')))}"
        )
        output.write_text("")
        code = 0
        for step in steps:
            env = {
                "PATH": os.environ["PATH"],
                "HOME": os.environ.get("HOME", "/root"),
                "RUNNER_TEMP": str(self.temp),
                "GITHUB_OUTPUT": str(output),
                "GITHUB_ENV": str(self.env_file),
                "GITHUB_STEP_SUMMARY": str(self.summary),
                "GITHUB_ACTIONS": "true",
                **self.exported,
                **{k: _render(v, context) for k, v in (step.get("env") or {}).items()},
            }
            workdir = cwd / _render(step.get("working-directory", "."), context)
            script = self.temp / "step.sh"
            script.write_text(step["run"])
            proc = subprocess.run(
                ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                cwd=workdir, env=env, capture_output=True, text=True, timeout=600,
            )  # fmt: skip
            self.last = proc
            self.exported.update(_kv_file(self.env_file))
            code = proc.returncode
            if code != 0:
                break
        return code, _kv_file(output)


# installs looprun from this checkout into a fresh venv (packages from PyPI): e2e tier
pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Runner:
    """The install step, run once: looprun from this checkout in a fresh venv."""
    runner = Runner(tmp_path_factory.mktemp("action"))
    install = [s for s in _action()["runs"]["steps"] if s["name"] == "Install looprun"]
    code, _ = runner.run({"template": "x"}, install, REPO)
    assert code == 0, runner.last.stderr
    assert Path(runner.exported["LOOPRUN_BIN"]).is_file()
    return runner


def _run_step() -> list[dict[str, Any]]:
    return [s for s in _action()["runs"]["steps"] if s.get("id") == "run"]


def test_action_metadata_declares_the_inputs_and_outputs() -> None:
    spec = _action()
    assert spec["runs"]["using"] == "composite"
    assert {"template", "intent", "model", "args"} <= set(spec["inputs"])
    assert {"outcome", "exit-code", "run-id", "report"} <= set(spec["outputs"])
    for step in spec["runs"]["steps"]:
        # inputs reach scripts through env, never pasted into the shell text
        assert "${{" not in step.get("run", ""), step["name"]


@pytest.mark.slow
def test_run_step_runs_the_loop_and_sets_the_outputs(installed: Runner, tmp_path: Path) -> None:
    repo, template, script = make_project(tmp_path)
    intent = f"add() subtracts $(touch pwned) \"quoted\" 'single' {HOSTILE}"
    inputs = {
        "template": str(template),
        "intent": intent,
        "model": f"script:{script}",
        "args": "--max-iterations '4'",
    }
    code, outputs = installed.run(inputs, _run_step(), repo)
    assert code == 0, installed.last.stdout + installed.last.stderr
    assert outputs["outcome"] == "done" and outputs["exit-code"] == "0"
    run_id = outputs["run-id"]
    assert (repo / ".looprun" / "runs" / run_id / "journal.jsonl").is_file()
    report = Path(outputs["report"])
    assert report.parent == installed.temp and "<details" in report.read_text()
    assert "## looprun mini: ✅ done" in installed.summary.read_text()
    assert not (repo / "pwned").exists()
    run_json = (repo / ".looprun" / "runs" / run_id / "run.json").read_text()
    assert '"max_iterations": 4' in run_json
    import json

    assert json.loads(run_json)["intent"] == intent  # verbatim, through a file


@pytest.mark.slow
def test_run_step_reports_an_unfinished_run_and_fails_the_step(
    installed: Runner, tmp_path: Path
) -> None:
    repo, template, script = make_project(tmp_path)
    inputs = {
        "template": str(template),
        "intent": "add() subtracts",
        "model": f"script:{script}",
        "args": "--max-iterations 1",
    }
    code, outputs = installed.run(inputs, _run_step(), repo)
    assert code == 3
    assert (outputs["outcome"], outputs["exit-code"]) == ("exhausted", "3")
    assert Path(outputs["report"]).is_file()
    # with fail-on-outcome false the step passes and a later step decides
    code, outputs = installed.run({**inputs, "fail-on-outcome": "false"}, _run_step(), repo)
    assert code == 0 and outputs["outcome"] == "exhausted"
    # an invalid template: no run, outcome "invalid", exit code 2
    code, outputs = installed.run({**inputs, "template": "missing.yaml"}, _run_step(), repo)
    assert code == 2 and outputs == {
        "outcome": "invalid",
        "exit-code": "2",
        "run-id": "",
        "report": "",
    }
