"""The related-tests tier on a real repository: `looprun bugfix` (the Python pack runs the
narrow selection, then the test files importing what the turn changed, then the whole
suite) with a scripted model whose first fix passes the new test but breaks another.

The related tier's failure is the feedback; a fix passing it but breaking a test that
imports the changed module only through another never ends done; done is decided on a
whole run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from e2e_helpers import git_init, prompt_of, scripted_bugfix, tiered_bugfix

CODE = "shop/price.py"
RIGHT = "    return round(amount * (100 - percent) / 100, 2)\n"
BUG = "    return round(amount * (100 - percent) / 100 + (1 if percent else 0), 2)\n"
# right for the new test's numbers, wrong when nothing is taken off
WRONG = "    return round(amount * (100 - percent) / 100, 2) if percent else amount + 1\n"
NEW_TEST = "tests/test_discount_bug.py"
FILES = {
    "shop/__init__.py": "",
    CODE: f"def discounted(amount, percent):\n{BUG}",
    "shop/cart.py": (
        "from shop.price import discounted\n\n\n"
        "def total(items, percent=0):\n"
        "    return round(sum(discounted(a, percent) for a in items), 2)\n"
    ),
    "tests/test_price.py": (
        "from shop.price import discounted\n\n\n"
        "def test_nothing_off():\n    assert discounted(10, 0) == 10\n"
    ),
    "tests/test_cart.py": (
        "from shop.cart import total\n\n\n"
        "def test_empty():\n    assert total([]) == 0\n"
        + "".join(
            f"\n\ndef test_items_{n}():\n    assert total([1] * {n}) == {n}\n" for n in range(1, 4)
        )
    ),
    "tests/test_unrelated.py": "def test_arithmetic():\n    assert 2 * 3 == 6\n",
}
REPRO = (
    "from shop.price import discounted\n\n\n"
    "def test_half_off():\n    assert discounted(10, 50) == 5\n"
)
INTENT = "discounted() adds one to every discounted price."


def _project(tmp: Path) -> Path:
    work = tmp / "shop-repo"
    for rel, text in FILES.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text, encoding="utf-8")
    return git_init(work)


def _edit(old: str, new: str, said: str) -> list[dict[str, Any]]:
    call = {"name": "edit_file", "arguments": {"path": CODE, "old": old, "new": new}}
    return [{"tool_calls": [call]}, {"text": said}]


def _turns(*fixes: tuple[str, str]) -> list[dict[str, Any]]:
    write = {"name": "write_file", "arguments": {"path": NEW_TEST, "content": REPRO}}
    out: list[dict[str, Any]] = [{"tool_calls": [write]}, {"text": "The new test fails."}]
    for old, new in fixes:
        out += _edit(old, new, "Fixed discounted.")
    return out


def _records(summary: dict[str, Any]) -> list[dict[str, Any]]:
    run = Path(summary["run_dir"]) / "observe"
    numbered = sorted(run.glob("[0-9]*.json"), key=lambda p: int(p.stem))
    return [json.loads(p.read_text())["observers"]["tests"] for p in numbered]


def test_the_related_tier_fails_first_and_done_is_a_whole_run(tmp_path: Path) -> None:
    work = _project(tmp_path)
    turns = _turns((BUG, WRONG), (WRONG, RIGHT))
    summary = scripted_bugfix(
        work, turns, INTENT, "--set", "lint=false", "--set", "strict=true",
        template=tiered_bugfix(tmp_path),
    )  # fmt: skip

    assert (summary["outcome"], summary["iterations"]) == ("done", 3), summary["stderr"]
    records = _records(summary)[1:]  # observe/0.json is the baseline
    assert records[0]["stage"] == "narrow"
    # the wrong fix passed the new test; the file importing the changed module failed,
    # and only it ran
    assert records[1]["stage"] == "related"
    assert records[1]["selected"] == [NEW_TEST, "tests/test_price.py"]
    assert records[1]["failing"] == ["tests/test_price.py::test_nothing_off"]
    assert not any("test_cart" in t or "test_unrelated" in t for t in records[1]["passing"])
    # the honest fix: both selections passed, then the whole suite decided done
    assert records[2]["stage"] == "whole"
    assert "tests/test_price.py" in records[2]["selected"]
    assert any("test_unrelated" in t for t in records[2]["passing"])


def test_passing_the_related_tier_while_breaking_a_further_test_never_ends_done(
    tmp_path: Path,
) -> None:
    work = _project(tmp_path)
    # right for every direct caller's numbers, wrong for what only the cart sees
    wrong = "    return round(amount * (100 - percent) / 100, 2) if amount != 1 else 0\n"
    summary = scripted_bugfix(
        work, _turns((BUG, wrong)), INTENT, "--set", "lint=false", "--max-iterations", "2",
        template=tiered_bugfix(tmp_path),
    )  # fmt: skip

    assert summary["outcome"] != "done", summary["stderr"]
    record = _records(summary)[2]
    assert record["stage"] == "whole" and "tests/test_price.py" in record["selected"]
    assert any("test_cart" in t for t in record["failing"])


def test_a_reproduction_the_related_tier_did_not_select_is_not_called_not_run(
    tmp_path: Path,
) -> None:
    """The new test reaches the changed module only through the cart: it passes in the
    narrow run and is not among the related tier's files, whose failure is the feedback;
    that feedback names the regression, never the passing reproduction as "not run"."""
    work = _project(tmp_path)
    repro = (
        "from shop.cart import total\n\n\n"
        "def test_half_off_through_the_cart():\n    assert total([10], 50) == 5\n"
    )
    write = {"name": "write_file", "arguments": {"path": NEW_TEST, "content": repro}}
    turns: list[dict[str, Any]] = [{"tool_calls": [write]}, {"text": "The new test fails."}]
    turns += _edit(BUG, WRONG, "Fixed discounted.") + _edit(WRONG, RIGHT, "Fixed it again.")
    summary = scripted_bugfix(
        work, turns, INTENT, "--set", "lint=false", "--set", "strict=true",
        template=tiered_bugfix(tmp_path),
    )  # fmt: skip

    assert (summary["outcome"], summary["iterations"]) == ("done", 3), summary["stderr"]
    record = _records(summary)[2]
    assert record["stage"] == "related" and record["selected"] == ["tests/test_price.py"]
    assert f"{NEW_TEST}::test_half_off_through_the_cart" in record["passing"]
    feedback = prompt_of(summary["run_dir"], 3)
    assert "tests/test_price.py::test_nothing_off" in feedback
    assert "not collected or not run" not in feedback


REEXPORT = {
    "tally/__init__.py": "from tally.core import count, first\n",
    "tally/core.py": (
        "def count(xs):\n    return max(0, len(list(xs)) - 1)\n\n\n"
        "def first(xs):\n    return next(iter(xs))\n"
    ),
    # every test file imports the package only: no file imports tally.core by name
    "tests/test_core.py": (
        "from unittest import TestCase\n\nimport tally\n\n\n"
        "class CountTests(TestCase):\n    def test_empty(self):\n"
        "        self.assertEqual(tally.count([]), 0)\n\n\n"
        "def test_first():\n    assert tally.first([2]) == 2\n"
    ),
    "tests/test_more.py": "".join(
        f"import tally\n\n\ndef test_first_{n}():\n    assert tally.first([{n}]) == {n}\n"
        for n in range(3)
    ),
}


def _tally_run(tmp: Path, files: dict[str, str], *extra: str) -> dict[str, Any]:
    """A tiered bugfix of ``count()`` in a tally package made of ``files``: the model writes
    the reproducing test, then a fix right for it and wrong for an empty list, then the
    right fix."""
    work = tmp / "tally-repo"
    for rel, text in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text, encoding="utf-8")
    git_init(work)
    bug = "    return max(0, len(list(xs)) - 1)\n"
    wrong = "    return max(1, len(list(xs)))\n"  # right for the new test, wrong when empty
    right = "    return len(list(xs))\n"
    repro = "import tally\n\n\ndef test_three():\n    assert tally.count([1, 2, 3]) == 3\n"
    write = {
        "name": "write_file",
        "arguments": {"path": "tests/test_count_bug.py", "content": repro},
    }
    turns: list[dict[str, Any]] = [{"tool_calls": [write]}, {"text": "The new test fails."}]
    for old, new in ((bug, wrong), (wrong, right)):
        edit = {"name": "edit_file", "arguments": {"path": "tally/core.py", "old": old, "new": new}}
        turns += [{"tool_calls": [edit]}, {"text": "Fixed count."}]
    return scripted_bugfix(
        work, turns, "count() is one short.", "--set", "lint=false", "--set", "strict=true",
        *extra, template=tiered_bugfix(tmp),
    )  # fmt: skip


def test_a_package_that_reexports_the_code_gets_the_tests_naming_what_changed(
    tmp_path: Path,
) -> None:
    summary = _tally_run(tmp_path, REEXPORT)

    assert (summary["outcome"], summary["iterations"]) == ("done", 3), summary["stderr"]
    records = _records(summary)[1:]
    # the wrong fix: the new test passed; the tests naming `count` failed, and only they
    # ran (no whole suite before the model heard of it)
    assert records[1]["stage"] == "related"
    assert records[1]["selected"] == ["tests/test_core.py::CountTests"]
    assert records[1]["failing"] == ["tests/test_core.py::CountTests::test_empty"]
    assert records[1]["tests"] == 1
    # done is decided on the whole suite
    assert records[2]["stage"] == "whole" and records[2]["tests"] == 6


def test_a_selection_where_no_test_runs_is_followed_by_the_whole_suite(tmp_path: Path) -> None:
    """The only test naming the changed function is a class pytest does not collect (it
    has ``__init__``): its selection runs nothing and names no failure, so the whole
    suite runs and decides, instead of "no tests ran" blocking every iteration."""
    files = {
        **REEXPORT,
        "tests/test_core.py": (
            "import tally\n\n\n"
            "def size(xs):\n    return tally.count(xs)\n\n\n"
            "class TestNotCollected:\n    def __init__(self):\n        self.f = tally.count\n\n"
            "    def test_x(self):\n        assert self.f([]) == 0\n\n\n"
            "def test_empty():\n    assert size([]) == 0\n"
        ),
    }
    summary = _tally_run(tmp_path, files, "--max-iterations", "3")

    assert (summary["outcome"], summary["iterations"]) == ("done", 3), summary["stderr"]
    records = _records(summary)[1:]
    assert records[1]["stage"] == "whole"
    assert records[1]["failing"] == ["tests/test_core.py::test_empty"]
