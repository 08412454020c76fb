"""`looprun init` writes a starter for the repository's stack: detected from the marker
files of the current directory or chosen with --stack; two stacks are the user's choice
(exit 2, naming them); none is python, said on the first line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from looprun.template import slots
from looprun.template.loader import load_template


def looprun(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "looprun", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _load(path: Path, stack: str):  # type: ignore[no-untyped-def]
    with slots.chosen(slots.StackChoice(stack, "test")):
        return load_template(path)


def test_a_go_repository_gets_a_go_starter_that_validates(tmp_path: Path) -> None:
    (tmp_path / "go.mod").write_text("module example.com/m\n\ngo 1.19\n", "utf-8")
    proc = looprun(tmp_path, "init", "team.yaml")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].startswith("wrote team.yaml (extends bugfix for the go")
    text = (tmp_path / "team.yaml").read_text("utf-8")
    assert "Written for the go stack" in text
    assert 'default: "go test ./..."' in text and 'default: "**/*_test.go"' in text
    # the comments are the go pack's, not python's
    assert "pytest" not in text and "ruff" not in text and "go vet" in text
    loaded = _load(tmp_path / "team.yaml", "go")
    assert loaded.inputs["test_command"].default == "go test ./..."
    proc = looprun(tmp_path, "validate", "team.yaml")
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("stack", "command"),
    [("node", "npm test"), ("rust", "cargo test --offline --no-fail-fast"), ("python", None)],
)
def test_stack_chooses_the_pack_whatever_the_directory_holds(
    tmp_path: Path, stack: str, command: str | None
) -> None:
    (tmp_path / "go.mod").write_text("module example.com/m\n", "utf-8")
    proc = looprun(tmp_path, "init", "loops/team.yaml", "--stack", stack)
    assert proc.returncode == 0, proc.stderr
    assert f"for the {stack} stack" in proc.stdout
    loaded = _load(tmp_path / "loops" / "team.yaml", stack)
    expected = command or load_template("bugfix").inputs["test_command"].default
    assert loaded.inputs["test_command"].default == expected


def test_two_stacks_are_the_users_choice(tmp_path: Path) -> None:
    (tmp_path / "go.mod").write_text("module example.com/m\n", "utf-8")
    (tmp_path / "package.json").write_text("{}\n", "utf-8")
    proc = looprun(tmp_path, "init", "team.yaml")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "more than one stack: go (go.mod), node (package.json)" in proc.stderr
    assert "--stack NAME" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "team.yaml").exists()
    assert looprun(tmp_path, "init", "team.yaml", "--stack", "node").returncode == 0


def test_no_stack_is_python_said_on_the_first_line(tmp_path: Path) -> None:
    proc = looprun(tmp_path, "init", "team.yaml", "--extends", "test_backfill")
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.startswith("no stack recognised") and "writing a python template" in first
    assert "--stack NAME" in first
    text = (tmp_path / "team.yaml").read_text("utf-8")
    assert "Written for the python stack" in text and "coverage run" in text


def test_a_node_backfill_starter_runs_nodes_runner_under_coverage(tmp_path: Path) -> None:
    (tmp_path / "package.json").write_text("{}\n", "utf-8")
    proc = looprun(tmp_path, "init", "cov.yaml", "--extends", "test_backfill", "--cases")
    assert proc.returncode == 0, proc.stderr
    loaded = _load(tmp_path / "cov.yaml", "node")
    assert loaded.inputs["test_command"].default == "node --test --experimental-test-coverage"
    proc = looprun(tmp_path, "test", "cov.cases.yaml")
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--stack", "cobol"), "--stack 'cobol': not a stack; the stacks are: python, go"),
        (
            ("--extends", "test_backfill", "--stack", "rust"),
            "test_backfill needs coverage, not available on the rust stack",
        ),
    ],
)
def test_a_stack_that_cannot_be_used_is_a_usage_error(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    proc = looprun(tmp_path, "init", "team.yaml", *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []
