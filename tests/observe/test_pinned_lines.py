"""``looprun_pinned``: each changed code line must be one the whole suite runs and notices
a change to (the refactor template's check), on a real project with real pytest runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from observe_helpers import runner_env

pytestmark = pytest.mark.e2e  # a few real pytest runs each: seconds on a busy machine

CODE = (
    "def price(n):\n"  # 1
    "    if n <= 0:\n"  # 2: run, and a change to it is noticed
    "        return 0\n"  # 3: run by no test
    "    total = n * 3\n"  # 4: run, and a change to it is noticed
    "    log = n + 1\n"  # 5: run, but nothing checks it
    "    return total\n"  # 6: run, and a change to it is noticed
)
TESTS = (
    "from shop import price\n\n\n"
    "def test_price():\n    assert price(2) == 6\n\n\n"
    "def test_already_failing():\n    assert price(1) == 4\n"
)


def _judge(root: Path, changed: dict[str, list[list[int]]], *extra: str) -> dict[str, object]:
    report = root / "pinned.json"
    subprocess.run(
        [sys.executable, "-m", "looprun_pinned", f"--report={report}",
         f"--changed={json.dumps(changed)}", "-o", f"pythonpath={root}", *extra],
        cwd=root, check=True, timeout=300,
        env=runner_env(),
    )  # fmt: skip
    return json.loads(report.read_text())


def _project(tmp_path: Path) -> Path:
    (tmp_path / "shop.py").write_text(CODE)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_shop.py").write_text(TESTS)
    return tmp_path


def test_each_changed_line_is_judged_and_the_failures_already_there_are_left_out(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path)
    failing = '--deselect=["tests/test_shop.py::test_already_failing"]'
    report = _judge(root, {"shop.py": [[2, 6]], "tests/test_shop.py": [[1, 9]]}, failing)

    assert report["ok"] is True, report
    assert report["files"] == ["shop.py"]  # a test file is what judges, not what is judged
    assert report["survived"] == [
        "shop.py:3: no test runs this line",
        "shop.py:5: `n + 1` changed to `n - 1` (and 1 other change(s)): no test notices",
    ], report
    assert (report["total"], report["killed"]) == (5, 3), report
    assert (root / "shop.py").read_text() == CODE  # every mutant was undone


def test_a_suite_that_fails_on_the_unchanged_code_is_reported_not_judged(tmp_path: Path) -> None:
    root = _project(tmp_path)
    report = _judge(root, {"shop.py": [[2, 6]]})

    assert report["ok"] is False and report["total"] == 0, report
    assert "the suite do not pass on the unchanged code" in str(report["error"]), report


def test_nothing_changed_in_the_code_judges_nothing(tmp_path: Path) -> None:
    root = _project(tmp_path)
    report = _judge(root, {"tests/test_shop.py": [[1, 9]]})

    assert (report["ok"], report["total"], report["score"]) == (True, 0, 1.0), report
