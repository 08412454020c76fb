"""`looprun validate`, `explain` and `schema` through click, and through a real process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from looprun.cli.main import main

REPO = Path(__file__).resolve().parents[2]
TEMPLATES = sorted(str(p) for p in (REPO / "templates").glob("*.yaml"))
MALFORMED = Path(__file__).parent / "malformed"


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def test_validate_builtin_templates_exits_zero() -> None:
    result = invoke("validate", *TEMPLATES, str(REPO / "samples/team/payments-bugfix.yaml"))
    assert result.exit_code == 0, result.output
    assert result.output.count(": OK") == len(TEMPLATES) + 1


def test_validate_fragment_on_its_own() -> None:
    result = invoke("validate", str(REPO / "templates/observers/python.yaml"))
    assert result.exit_code == 0, result.output


def test_validate_reports_every_file_and_summarises() -> None:
    bad = str(MALFORMED / "several_mistakes.yaml")
    result = invoke("validate", TEMPLATES[0], bad)
    assert result.exit_code == 2
    lines = result.output.splitlines()
    assert lines[0].endswith(": OK")
    assert sum(1 for line in lines if line.startswith(bad + ":")) == 4
    assert lines[-1] == "4 problems in 1 of 2 files"


def test_validate_quiet_prints_only_problems() -> None:
    result = invoke("validate", "--quiet", *TEMPLATES)
    assert (result.exit_code, result.output) == (0, "")


def test_validate_of_a_directory_validates_the_looprun_files_in_it(tmp_path: Path) -> None:
    result = invoke("validate", str(MALFORMED / "parts"))
    assert result.exit_code == 2
    assert "parts/bad_parent.yaml:5:3: unknown key 'max_step' in act" in result.output
    assert "2 problems in 2 of 2 files" in result.output  # files with `looprun:` only
    # a Helm chart's templates/ folder holds no looprun file: nothing is claimed valid
    chart = tmp_path / "chart" / "templates"
    chart.mkdir(parents=True)
    (chart / "deployment.yaml").write_text("apiVersion: apps/v1\nkind: Deployment\n")
    empty = invoke("validate", str(tmp_path / "chart"))
    assert empty.exit_code == 2
    assert "no looprun templates here" in empty.output
    (tmp_path / "chart" / "loop.yaml").write_text(
        (REPO / "samples/team/payments-bugfix.yaml").read_text()
    )
    ok = invoke("validate", str(tmp_path / "chart"))
    assert ok.exit_code == 0, ok.output
    assert "loop.yaml: OK" in ok.output and "deployment" not in ok.output


def test_explain_text_shows_tree_and_limits() -> None:
    result = invoke("explain", "bugfix")
    assert result.exit_code == 0, result.output
    assert "refine (first matching rule decides):" in result.output
    # every rule carries its one name (its id, or else file:line) beside its position
    assert '\n  5. [reproduce] if task.id == "reproduce":' in result.output
    assert "5.7. [reproduce_outside_tests] else -> retry" in result.output
    assert "limits: max_iterations 12" in result.output


def test_explain_mermaid_feature_shows_outer_loop_and_sub_loop() -> None:
    result = invoke("explain", str(REPO / "templates/feature.yaml"), "--format", "mermaid")
    assert result.exit_code == 0, result.output
    out = result.output
    assert out.startswith("flowchart TD\n")
    assert 'subgraph sub["each task: bugfix' in out
    assert 's_plan["plan: static - reproduce then fix"]' in out  # the inner loop's own plan
    assert "s_act[" in out and "s_exit{" in out  # inner act + exit check
    assert "plan -- per task --> s_plan" in out  # outer plan feeds the sub-loop
    assert 'plan["plan: model' in out and "exit{" in out  # the outer loop
    assert "-.-> plan" in out  # outer replan goes back to planning
    assert out.count("subgraph") == out.count("\n  end\n") + out.count("\nend\n")


def test_explain_json_is_the_resolved_document() -> None:
    result = invoke("explain", str(REPO / "samples/team/payments-bugfix.yaml"), "--format", "json")
    data = json.loads(result.output)
    assert data["name"] == "payments-bugfix"
    assert "extends" not in data and "include" not in data
    assert data["limits"]["max_iterations"] == 6 and data["limits"]["max_tokens"] == 400000
    assert "cov" not in data["observe"] and "tests" in data["observe"]


def test_explain_invalid_template_is_a_clean_error() -> None:
    result = invoke("explain", str(MALFORMED / "unknown_top_key.yaml"))
    assert result.exit_code == 2
    assert "unknown key 'observer' (did you mean 'observe'?)" in result.output
    assert "Traceback" not in result.output


def test_schema_command_prints_the_schema() -> None:
    result = invoke("schema")
    assert json.loads(result.output)["title"] == "looprun loop template"


def test_real_process_reports_problems_without_traceback() -> None:
    bad = MALFORMED / "several_mistakes.yaml"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "looprun",
            "validate",
            *TEMPLATES,
            str(bad),
            str(MALFORMED / "binary.yaml"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr + proc.stdout
    assert f"{bad}:12:8: exit[0]: unknown name 'tets'" in proc.stdout
    assert "binary.yaml:1:1: not a text file" in proc.stdout
