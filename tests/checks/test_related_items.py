"""The tests that name what a turn changed, on real trees: found by reading code (a package
that re-exports the changed module, an alias, a unittest class), and None (no such
tier: the whole suite decides) whenever the change is not a set of definitions."""

from __future__ import annotations

from pathlib import Path

from tests.support.files import write_tree

from looprun.checks.related_items import changed_definitions, related_items
from looprun.data.changes import FileChange

CORE = (
    "import math\n\nLIMIT = 3\n\n\n"
    "def count(xs):\n    return len(list(xs))\n\n\n"
    "def first(xs):\n    return next(iter(xs))\n\n\n"
    "class Bag:\n    def size(self):\n        return 0\n\n"
    "    def empty(self):\n        return True\n\n\n"
    "def spare():\n    return 1\n"
)
TREE = {
    "pkg/__init__.py": "from pkg.core import *\n",
    "pkg/core.py": CORE,
    # the package only: `pkg.count` through the re-export
    "tests/test_core.py": (
        "from unittest import TestCase\n\nimport pkg\n\n\n"
        "class CountTests(TestCase):\n    def test_count(self):\n"
        "        self.assertEqual(pkg.count([1]), 1)\n\n\n"
        "def test_first():\n    assert pkg.first([2]) == 2\n\n\n"
        "class TestBag:\n    def test_size(self):\n        assert pkg.Bag().size() == 0\n\n\n"
        "def helper_not_a_test():\n    return pkg.count([])\n"
    ),
    "tests/test_alias.py": (
        "from pkg import count as n\n\n\ndef test_alias():\n    assert n([]) == 0\n"
    ),
    # names `count` too, but never imports the package: not selected
    "tests/test_other.py": "def test_count():\n    count = 1\n    assert count\n",
}


def _edit(old: str, new: str, path: str = "pkg/core.py") -> FileChange:
    assert old in CORE
    return FileChange(path, "M", CORE, CORE.replace(old, new))


def test_tests_naming_a_changed_function_are_selected_through_a_reexporting_package(
    tmp_path: Path,
) -> None:
    root = write_tree(tmp_path, TREE)
    change = _edit("return len(list(xs))", "return len(list(xs)) + 1")
    assert related_items(root, [change]) == (
        "tests/test_alias.py::test_alias",
        "tests/test_core.py::CountTests",
    )
    # a changed method selects the test class naming it; a changed test file is selected
    bag = _edit("        return 0\n", "        return 1\n")
    new_test = FileChange("tests/test_new.py", "A", None, "def test_x():\n    pass\n")
    assert related_items(root, [bag, new_test]) == (
        "tests/test_core.py::TestBag",
        "tests/test_new.py",
    )


def test_moved_or_unchanged_definitions_are_no_change() -> None:
    count = "def count(xs):\n    return len(list(xs))\n\n\n"
    first = "def first(xs):\n    return next(iter(xs))\n\n\n"
    reordered = CORE.replace(count + first, first + count)
    assert reordered != CORE
    assert changed_definitions(CORE, reordered) == set()
    assert changed_definitions(CORE, CORE + "\n# a comment\n") == set()
    assert changed_definitions(CORE, CORE.replace("len(list(xs))", "sum(1 for _ in xs)")) == {
        "count"
    }
    added = changed_definitions(None, "def new():\n    pass\n")
    assert added == {"new"}


def test_anything_but_definitions_is_unsure(tmp_path: Path) -> None:
    root = write_tree(tmp_path, TREE)
    assert related_items(root, [_edit("LIMIT = 3", "LIMIT = 4")]) is None
    assert related_items(root, [_edit("import math", "import cmath")]) is None
    assert related_items(root, [_edit("def count(xs):", "def count(xs:")]) is None
    assert related_items(root, [FileChange("pkg/core.py", "D", CORE, None)]) is None
    assert related_items(root, [FileChange("setup.cfg", "M", "", "[x]\n")]) is None
    assert related_items(root, [FileChange("tests/conftest.py", "M", "", "x = 1\n")]) is None
    write_tree(root, {"tests/test_broken.py": "import pkg\ndef test_x(:\n"})
    assert related_items(root, [_edit("return len(list(xs))", "return 0")]) is None


def test_a_change_no_test_names_selects_nothing(tmp_path: Path) -> None:
    root = write_tree(tmp_path, TREE)
    assert related_items(root, [_edit("    return 1\n", "    return 2\n")]) == ()
