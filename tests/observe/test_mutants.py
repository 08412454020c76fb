"""looprun's mutation runner (``looprun_mutants``): the mutants it makes, and its verdict on
real tests run by real pytest in a scratch tree."""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from observe_helpers import runner_env

from looprun.observe.outcome_channel import PLUGIN_DIR

_spec = importlib.util.spec_from_file_location("looprun_mutants", PLUGIN_DIR / "looprun_mutants.py")
assert _spec is not None and _spec.loader is not None
mutants = importlib.util.module_from_spec(_spec)
sys.modules["looprun_mutants"] = mutants
_spec.loader.exec_module(mutants)

CODE = b'''"""Labels."""


def label(celsius: float) -> str:
    if celsius < 0 and celsius != -1:
        return "freezing"
    return f"{celsius + 1} degrees"


def total(a: int, b: int) -> int:
    return a + b - 1
'''


def test_each_kind_of_mutant_is_made_and_still_parses() -> None:
    made = mutants.generate("m.py", CODE)
    labels = [m.label() for m in made]
    assert labels == [
        "m.py:5: condition `celsius < 0 and celsius != -1` negated",
        "m.py:5: `celsius < 0 and celsius != -1` changed to `celsius < 0 or celsius != -1`",
        "m.py:5: `celsius < 0` changed to `celsius >= 0`",
        "m.py:5: `0` changed to `1`",
        "m.py:5: `celsius != -1` changed to `celsius == -1`",
        "m.py:5: `1` changed to `2`",
        "m.py:6: `return 'freezing'` changed to `return None`",
        "m.py:7: `return f'{celsius + 1} degrees'` changed to `return None`",
        "m.py:11: `return a + b - 1` changed to `return None`",
        "m.py:11: `a + b - 1` changed to `a + b + 1`",
        "m.py:11: `a + b` changed to `a - b`",
        "m.py:11: `1` changed to `2`",
    ]
    for m in made:
        ast.parse(m.apply(CODE))  # every mutant is valid python
        assert m.apply(CODE) != CODE
    # the docstring and the lines outside the f-string are left alone; only listed lines
    assert [m.line for m in mutants.generate("m.py", CODE, {11})] == [11] * 4
    assert mutants.generate("m.py", b"def (:\n") == []


def test_a_mutant_changes_only_its_own_span() -> None:
    (flip,) = [m for m in mutants.generate("m.py", CODE) if "celsius >= 0" in m.description]
    out = flip.apply(CODE).decode()
    assert "    if (celsius >= 0) and celsius != -1:\n" in out
    assert out.replace("(celsius >= 0)", "celsius < 0") == CODE.decode()


def test_the_sample_is_spread_evenly_and_deterministic() -> None:
    made = mutants.generate("m.py", CODE)
    chosen = mutants.spread(made, 4)
    assert chosen == mutants.spread(made, 4)
    assert [made.index(m) for m in chosen] == [0, 3, 6, 9]
    assert mutants.spread(made, 0) == []
    assert mutants.spread(made, 100) == made


def _project(tmp_path: Path, test: str) -> Path:
    (tmp_path / "calc.py").write_bytes(CODE)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_calc.py").write_text(test)
    return tmp_path


def _judge(root: Path) -> dict[str, object]:
    report = root / "mutants.json"
    changed = json.dumps({"tests/test_calc.py": [[1, 9]]})
    subprocess.run(
        [sys.executable, "-m", "looprun_mutants", f"--report={report}", '--targets=["calc.py"]',
         f"--changed={changed}", "--max=20", "-o", f"pythonpath={root}"],
        cwd=root, check=True, env=runner_env(),
    )  # fmt: skip
    return json.loads(report.read_text())


@pytest.mark.e2e  # a dozen real pytest runs: seconds each on a busy machine
def test_tests_that_assert_nothing_let_mutants_survive(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        "from calc import label, total\n\n\ndef test_it():\n    label(-5)\n    label(3)\n"
        "    assert total(2, 3) or True\n",
    )
    report = _judge(root)
    assert report["ok"] is True
    assert report["total"] == 12 and report["killed"] == 0 and report["score"] == 0.0
    assert "calc.py:11: `a + b` changed to `a - b`" in report["survived"]  # type: ignore[operator]
    assert (root / "calc.py").read_bytes() == CODE  # every mutant was undone


@pytest.mark.e2e  # a dozen real pytest runs: seconds each on a busy machine
def test_real_assertions_kill_the_mutants(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        "from calc import label, total\n\n\ndef test_it():\n    assert label(-5) == 'freezing'\n"
        "    assert label(-1) == '0 degrees'\n    assert label(3) == '4 degrees'\n"
        "    assert total(2, 3) == 4\n",
    )
    report = _judge(root)
    assert report["ok"] is True and report["total"] == 12
    assert report["score"] >= 0.9, report["survived"]  # type: ignore[operator]
    assert (root / "calc.py").read_bytes() == CODE


@pytest.mark.e2e  # a dozen real pytest runs: seconds each on a busy machine
def test_new_tests_failing_alone_are_reported_not_judged(tmp_path: Path) -> None:
    root = _project(
        tmp_path, "from calc import total\n\n\ndef test_it():\n    assert total(1, 1) == 5\n"
    )
    report = _judge(root)
    assert report["ok"] is False and report["total"] == 0
    assert "do not pass on the unchanged code" in str(report["error"])


@pytest.mark.e2e  # real pytest runs, one of them stopped by the timeout
def test_a_mutant_that_never_ends_is_killed_by_the_timeout(tmp_path: Path) -> None:
    (tmp_path / "count.py").write_text(
        "def count(n):\n    i = 0\n    while i != n:\n        i += 1\n    return i\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_count.py").write_text(
        "from count import count\n\n\ndef test_count():\n    assert count(3) == 3\n"
    )
    report = tmp_path / "mutants.json"
    subprocess.run(
        [sys.executable, "-m", "looprun_mutants", f"--report={report}", '--targets=["count.py"]',
         '--changed={"tests/test_count.py": [[1, 5]]}', "--timeout=5", "-o",
         f"pythonpath={tmp_path}"],
        cwd=tmp_path, check=True, timeout=120,
        env=runner_env(),
    )  # fmt: skip
    result = json.loads(report.read_text())
    # `i += 1` -> `i += 2` never reaches 3: killed by the timeout, not left running
    assert "count.py:4: `1` changed to `2`" not in result["survived"]
    assert result["survived"] == ["count.py:2: `0` changed to `1`"]
    assert (tmp_path / "count.py").read_text().startswith("def count(n):\n    i = 0\n")
