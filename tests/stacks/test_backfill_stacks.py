"""`looprun test_backfill` on every stack, the stack detected from the repository: on go
and node a scripted model first writes a skipped test (refused and undone: it covers
nothing it claims to), then real tests; the run ends `done` only once the target's
coverage, measured by the stack's own tool, has risen to the threshold, with only test
files changed. On rust and java, which have no coverage tool here, the run stops before
any model call."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.support.tools import require

GO = {
    "go.mod": "module example.com/geom\n\ngo 1.19\n",
    "geom/geom.go": """// Package geom measures simple shapes.
package geom

// Area of a rectangle; negative sides count as zero.
func Area(w, h int) int {
	if w < 0 || h < 0 {
		return 0
	}
	return w * h
}

// Kind names a rectangle by its sides.
func Kind(w, h int) string {
	if w == h {
		return "square"
	}
	return "rectangle"
}
""",
    "geom/geom_test.go": """package geom

import "testing"

func TestAreaOfARectangle(t *testing.T) {
	if got := Area(2, 3); got != 6 {
		t.Fatalf("Area(2, 3) = %d", got)
	}
}
""",
}
GO_SKIPPED = """package geom

import "testing"

func TestKind(t *testing.T) {
	t.Skip("later")
	if Kind(2, 2) != "square" {
		t.Fatal("2x2")
	}
}
"""
GO_TESTS = """package geom

import "testing"

func TestKindOfASquareAndARectangle(t *testing.T) {
	if got := Kind(2, 2); got != "square" {
		t.Fatalf("Kind(2, 2) = %q", got)
	}
	if got := Kind(2, 3); got != "rectangle" {
		t.Fatalf("Kind(2, 3) = %q", got)
	}
}

func TestNegativeSidesHaveNoArea(t *testing.T) {
	if got := Area(-1, 3); got != 0 {
		t.Fatalf("Area(-1, 3) = %d", got)
	}
}
"""

NODE = {
    "package.json": '{"name": "durations", "version": "1.0.0", "private": true, '
    '"scripts": {"test": "node --test"}}\n',
    "src/duration.js": """'use strict';

function pad(n) {
  return String(n).padStart(2, '0');
}

function format(totalSeconds) {
  if (totalSeconds < 0) {
    throw new RangeError('negative duration');
  }
  const minutes = Math.floor(totalSeconds / 60);
  return `${minutes}:${pad(totalSeconds % 60)}`;
}

module.exports = { format };
""",
    "test/sanity.test.js": """const test = require('node:test');
const assert = require('node:assert');

test('the runner runs', () => {
  assert.strictEqual(1 + 1, 2);
});
""",
}
NODE_SKIPPED = """const test = require('node:test');
const assert = require('node:assert');
const { format } = require('../src/duration.js');

test.skip('formats minutes', () => {
  assert.strictEqual(format(65), '1:05');
});
"""
NODE_TESTS = """const test = require('node:test');
const assert = require('node:assert');
const { format } = require('../src/duration.js');

test('formats minutes and padded seconds', () => {
  assert.strictEqual(format(65), '1:05');
});

test('refuses a negative duration', () => {
  assert.throws(() => format(-1), RangeError);
});
"""

# stack -> (program, files, target, new test file, skipped test, real tests)
CASES: dict[str, tuple[str, dict[str, str], str, str, str, str]] = {
    "go": ("go", GO, "geom/geom.go", "geom/kind_test.go", GO_SKIPPED, GO_TESTS),
    "node": (
        "node",
        NODE,
        "src/duration.js",
        "test/duration.test.js",
        NODE_SKIPPED,
        NODE_TESTS,
    ),
}


def _require(program: str) -> None:
    require(program, ".ci/run installs it")


def _repo(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, "utf-8")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=root, check=True)
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "start"], cwd=root, check=True)
    return root


def _write(path: str, content: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": content}}]}


def _backfill(work: Path, turns: list[dict[str, Any]], target: str) -> dict[str, Any]:
    script = work.parent / "script.yaml"
    script.write_text(yaml.safe_dump(turns, sort_keys=False), "utf-8")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "looprun",
            "test_backfill",
            "--set",
            f"target={target}",
            "--set",
            "lint=false",
            "--model",
            f"script:{script}",
            "--json",
        ],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.stdout.strip(), proc.stderr
    return {**json.loads(proc.stdout), "exit": proc.returncode, "stderr": proc.stderr}


def _coverage(summary: dict[str, Any], iteration: int) -> float:
    path = Path(summary["run_dir"]) / "observe" / f"{iteration}.json"
    cov = json.loads(path.read_text("utf-8"))["observers"]["cov"]
    return float(cov["target_percent"])


@pytest.mark.e2e
@pytest.mark.parametrize("stack", sorted(CASES))
def test_backfill_ends_done_when_real_tests_raise_the_coverage(stack: str, tmp_path: Path) -> None:
    program, files, target, new_test, skipped, tests = CASES[stack]
    _require(program)
    work = _repo(tmp_path / "repo", files)
    code_before = (work / target).read_bytes()
    turns = [
        _write(new_test, skipped),
        {"text": "Skipped for now."},
        _write(new_test, tests),
        {"text": "Covered."},
    ]
    summary = _backfill(work, turns, target)
    assert summary["exit"] == 0, summary["stderr"]
    assert f"stack: {stack}" in summary["stderr"]
    assert (summary["outcome"], summary["iterations"]) == ("done", 2), summary["stderr"]
    # the skipped test was refused and undone; the real ones raised the coverage to done
    assert "rollback" in summary["stderr"] and "policy_violation" in summary["stderr"]
    before, after = _coverage(summary, 0), _coverage(summary, 2)
    assert before < 80 <= after, (before, after)
    assert summary["changed_files"] == [new_test]
    assert (work / target).read_bytes() == code_before
    # the coverage reports stayed out of the tree
    status = subprocess.run(
        ["git", "status", "--porcelain", "--ignored"], cwd=work, capture_output=True, text=True
    ).stdout
    assert [line[3:] for line in status.splitlines() if ".looprun" not in line] == [new_test]


@pytest.mark.e2e
@pytest.mark.parametrize("stack", sorted(CASES))
def test_a_skipped_test_alone_never_ends_done(stack: str, tmp_path: Path) -> None:
    """The skip is refused every time: the coverage never moves and the run escalates."""
    program, files, target, new_test, skipped, _ = CASES[stack]
    _require(program)
    work = _repo(tmp_path / "repo", files)
    turns = [_write(new_test, skipped), {"text": "Skipped."}] * 5
    summary = _backfill(work, turns, target)
    assert summary["outcome"] != "done", summary["stderr"]
    assert not (work / new_test).exists()


MARKERS = {
    "rust": {"Cargo.toml": '[package]\nname = "r"\nversion = "0.1.0"\nedition = "2021"\n'},
    "java": {"pom.xml": "<project><modelVersion>4.0.0</modelVersion></project>\n"},
}


@pytest.mark.parametrize("stack", sorted(MARKERS))
def test_a_stack_without_coverage_stops_before_any_model_call(stack: str, tmp_path: Path) -> None:
    work = _repo(tmp_path / "repo", {**MARKERS[stack], "src/lib.txt": "code\n"})
    turns = [_write("tests/a_test.txt", "written\n"), {"text": "Done."}]
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump(turns), "utf-8")
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "looprun", "test_backfill"),
            *("--set", "target=src/lib.txt", "--model", f"script:{script}"),
        ],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert f"test_backfill needs coverage, not available on the {stack} stack" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (work / "tests").exists()
    assert not list((work / ".looprun").glob("runs/*"))


def test_explain_says_the_coverage_is_unavailable(tmp_path: Path) -> None:
    work = _repo(tmp_path / "repo", MARKERS["rust"])
    proc = subprocess.run(
        [sys.executable, "-m", "looprun", "explain", "test_backfill"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "unavailable, a run stops before it starts: test_backfill needs coverage" in proc.stdout


@pytest.mark.e2e
def test_node_tests_on_another_runner_stop_before_any_model_call(tmp_path: Path) -> None:
    """Coverage comes from node's own runner: a jest suite is named, not run as node's."""
    _require("node")
    files = {
        **NODE,
        "package.json": '{"name": "d", "version": "1.0.0", "scripts": {"test": "jest"}}\n',
    }
    work = _repo(tmp_path / "repo", files)
    summary = _backfill(work, [_write("test/a.test.js", NODE_TESTS), {"text": "x"}], "src/a.js")
    assert (summary["outcome"], summary["iterations"]) == ("error", 0), summary["stderr"]
    assert "measures coverage with node's test runner only" in summary["reason"]
    assert "runs jest" in summary["reason"]
    assert not (work / "test" / "a.test.js").exists()
