"""Held-out variants on the node stack with vitest and jest, on real runners installed
from npm: a fix that special-cases the reproducing test's input never ends `done` (the
kept variants fail), the same run with the variants turned off ends `done` (so they are
what stops it), and the honest fix ends `done` with the variants passing.

The package is a small `formatDuration` whose seconds are not padded (65 gives "1:5").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from node_support import bugfix, events, node_package, npm_modules
from tests.support.git_repos import git_repo

pytestmark = pytest.mark.e2e

NEW_TEST = "test/padding.test.js"
BUGGY = "  const seconds = String(totalSeconds % 60);\n"
# per runner: the module system the package uses, how a test loads its functions
SHAPES: dict[str, dict[str, Any]] = {
    "vitest": {
        "package": {"type": "module", "scripts": {"test": "vitest run"}},
        "head": "import { test, expect } from 'vitest';\n"
        "import { formatDuration } from '../src/duration.js';\n",
        "export": "export function formatDuration",
    },
    "jest": {
        "package": {"scripts": {"test": "jest"}},
        "head": "const { formatDuration } = require('../src/duration.js');\n",
        "export": "exports.formatDuration = function formatDuration",
    },
}


@pytest.fixture(scope="module")
def runners(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """node_modules holding vitest 3 and jest 29, installed once for the module's tests."""
    return npm_modules(tmp_path_factory, "vitest@3", "jest@29")


def _source(runner: str) -> str:
    return (
        f"{SHAPES[runner]['export']}(totalSeconds) {{\n"
        "  const minutes = Math.floor(totalSeconds / 60);\n"
        f"{BUGGY}"
        "  return `${minutes}:${seconds}`;\n}\n"
    )


def _test(runner: str, name: str, *checks: tuple[int, str]) -> str:
    body = "".join(f"  expect(formatDuration({n})).toBe('{want}');\n" for n, want in checks)
    return f"test('{name}', () => {{\n{body}}});\n"


def _repo(tmp_path: Path, modules: Path, runner: str) -> Path:
    files = {
        "src/duration.js": _source(runner),
        "test/duration.test.js": SHAPES[runner]["head"]
        + "\n"
        + _test(runner, "formats minutes and seconds", (75, "1:15")),
    }
    package = {"name": "durations", "version": "1.0.0", "private": True}
    package.update(SHAPES[runner]["package"])
    return git_repo(node_package(tmp_path / "repo", modules, package, files, copy=True))


def _reproduce(runner: str) -> list[dict[str, Any]]:
    content = SHAPES[runner]["head"] + "\n" + _test(runner, "pads the seconds", (65, "1:05"))
    write = {"name": "write_file", "arguments": {"path": NEW_TEST, "content": content}}
    return [{"tool_calls": [write]}, {"text": "The test reproduces the bug."}]


def _variants(runner: str) -> dict[str, Any]:
    """The holdout role's answer: three tests of other durations, each failing unpadded."""
    tests = "\n".join(
        _test(runner, f"heldout variant {i}", check)
        for i, check in enumerate(((3, "0:03"), (607, "10:07"), (121, "2:01")), 1)
    )
    return {"role": "holdout", "text": f"```js\n{SHAPES[runner]['head']}\n{tests}```\n"}


def _fix(new: str) -> list[dict[str, Any]]:
    edit = {"name": "edit_file", "arguments": {"path": "src/duration.js", "old": BUGGY, "new": new}}
    return [{"tool_calls": [edit]}, {"text": "Fixed."}]


# the visible input special-cased: the suite and the reproducing test pass
SPECIAL_CASE = _fix("  if (totalSeconds === 65) return '1:05';\n" + BUGGY)
HONEST_FIX = _fix(BUGGY.replace(");", ").padStart(2, '0');"))


def _observed(summary: dict[str, Any], iteration: int) -> dict[str, Any]:
    path = Path(summary["run_dir"]) / "observe" / f"{iteration}.json"
    observers: dict[str, Any] = json.loads(path.read_text())["observers"]
    return observers


@pytest.mark.parametrize("runner", list(SHAPES))
def test_special_casing_the_visible_input_never_ends_done(
    runner: str, runners: Path, tmp_path: Path
) -> None:
    repo = _repo(tmp_path, runners, runner)
    turns = [*_reproduce(runner), _variants(runner), *SPECIAL_CASE]
    summary = bugfix(tmp_path, repo, turns, "--max-iterations", "2")

    assert summary["outcome"] != "done" and summary["exit"] != 0, summary["stderr"]
    assert f"runner: {runner}" in summary["stderr"]
    iterations = events(summary, "iteration")
    assert [e["decision"]["action"] for e in iterations] == ["done", "retry"]
    decision = iterations[1]["decision"]
    assert decision["rule"] == "heldout_variants", decision
    (heldout,) = events(summary, "heldout")
    assert (heldout["status"], heldout["written"], heldout["kept"]) == ("kept", 3, 3), heldout
    variants = _observed(summary, 2)["variants"]
    assert (variants["ran"], variants["tests"], variants["failed"]) == (True, 3, 3), variants
    # the model learns a count, never the variants' names or inputs
    assert "heldout variant" not in decision["message"], decision
    for record in Path(summary["run_dir"]).rglob("*"):
        if record.is_file():
            assert "10:07" not in record.read_text(errors="replace"), record
    assert not list(repo.glob("test/heldout_variants*"))


@pytest.mark.parametrize("runner", list(SHAPES))
def test_without_the_variants_special_casing_ends_done(
    runner: str, runners: Path, tmp_path: Path
) -> None:
    """The control: the same run with the variants turned off is `done`, so it is the
    variants that stop it above."""
    repo = _repo(tmp_path, runners, runner)
    turns = [*_reproduce(runner), _variants(runner), *SPECIAL_CASE]
    summary = bugfix(tmp_path, repo, turns, "--set", "holdout_variants=0")

    assert (summary["outcome"], summary["exit"]) == ("done", 0), summary["stderr"]
    (heldout,) = events(summary, "heldout")
    assert heldout["status"] == "off", heldout


@pytest.mark.parametrize("runner", list(SHAPES))
def test_the_honest_fix_passes_the_held_out_variants(
    runner: str, runners: Path, tmp_path: Path
) -> None:
    repo = _repo(tmp_path, runners, runner)
    turns = [*_reproduce(runner), _variants(runner), *HONEST_FIX]
    summary = bugfix(tmp_path, repo, turns)

    assert (summary["outcome"], summary["iterations"]) == ("done", 2), summary["stderr"]
    variants = _observed(summary, 2)["variants"]
    # only the three variants ran (the package's own tests are the suite's)
    assert (variants["ran"], variants["ok"], variants["tests"], variants["failed"]) == (
        True,
        True,
        3,
        0,
    ), variants
    assert not events(summary, "warning"), events(summary, "warning")
    assert not list(repo.glob("test/heldout_variants*"))
