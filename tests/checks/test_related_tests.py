"""The related-tests selection on real trees, hostile ones included: it only parses, stays
inside the workspace, and answers None (run the whole suite) whenever it is unsure."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.files import write_tree

from looprun.checks.related import related_tests

BASE = {
    "pkg/__init__.py": "",
    "pkg/text.py": "def shout(s):\n    return s.upper()\n",
    "pkg/nums.py": "from pkg.text import shout\n\ndef two():\n    return 2\n",
    "tests/test_text.py": "from pkg.text import shout\n\ndef test_a():\n    assert shout('a')\n",
    "tests/test_nums.py": "import pkg.nums\n\ndef test_two():\n    assert pkg.nums.two() == 2\n",
    "tests/test_other.py": "def test_nothing_imported():\n    assert 1 + 1 == 2\n",
}


def test_direct_importers_and_changed_test_files_are_selected(tmp_path: Path) -> None:
    root = write_tree(tmp_path, BASE)
    assert related_tests(root, ["pkg/text.py"]) == ("tests/test_text.py",)
    assert related_tests(root, ["pkg/nums.py", "tests/test_other.py"]) == (
        "tests/test_nums.py",
        "tests/test_other.py",
    )
    # `from pkg import text` and a relative import name the module too
    write_tree(root, {"tests/sub/__init__.py": "", "tests/sub/test_rel.py": "from ..x import y\n"})
    write_tree(root, {"tests/test_from.py": "from pkg import text\n"})
    assert related_tests(root, ["pkg/text.py"]) == ("tests/test_from.py", "tests/test_text.py")
    assert related_tests(root, ["tests/x.py"]) == ("tests/sub/test_rel.py",)


def test_src_layout_and_package_init(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            "src/lib2/__init__.py": "",
            "src/lib2/core.py": "",
            "tests/test_core.py": "import lib2.core\n",
            "tests/test_plain.py": "x = 1\n",
        },
    )
    assert related_tests(root, ["src/lib2/core.py"]) == ("tests/test_core.py",)
    # `import lib2.core` runs lib2/__init__.py as well
    assert related_tests(root, ["src/lib2/__init__.py"]) == ("tests/test_core.py",)


def test_unsure_changes_mean_the_whole_suite(tmp_path: Path) -> None:
    root = write_tree(tmp_path, {**BASE, "tests/conftest.py": "", "data.json": "{}"})
    assert related_tests(root, ["tests/conftest.py"]) is None  # fixtures reach every test
    assert related_tests(root, ["data.json"]) is None
    assert related_tests(root, ["pkg/bad-name.py"]) is None
    # every test file related: the whole command is the same run
    assert related_tests(root, ["pkg/__init__.py"]) is not None
    everything = ["tests/test_text.py", "tests/test_nums.py", "tests/test_other.py"]
    assert related_tests(root, everything) is None


def test_a_test_file_with_a_syntax_error_or_a_huge_one_is_unsure(tmp_path: Path) -> None:
    root = write_tree(tmp_path, {**BASE, "tests/test_broken.py": "def test_x(:\n"})
    assert related_tests(root, ["pkg/text.py"]) is None
    (root / "tests/test_broken.py").write_text("x = 1\n" * 400_000)  # 2.4 MB
    assert related_tests(root, ["pkg/text.py"]) is None
    (root / "tests/test_broken.py").write_bytes(b"\xff\xfe\x00 not python")
    assert related_tests(root, ["pkg/text.py"]) is None


def test_a_link_out_of_the_tree_is_never_selected_nor_followed(tmp_path: Path) -> None:
    outside = write_tree(tmp_path / "outside", {"test_secret.py": "import pkg.text\n"})
    root = write_tree(tmp_path / "work", BASE)
    os.symlink(outside / "test_secret.py", root / "tests" / "test_link.py")
    os.symlink(outside, root / "tests" / "linked_dir")
    # a test file linked out of the tree: unsure, never read as the tree's
    assert related_tests(root, ["pkg/text.py"]) is None
    # even named as changed it is never selected
    os.unlink(root / "tests" / "test_link.py")
    assert related_tests(root, ["pkg/text.py"]) == ("tests/test_text.py",)
    os.symlink(outside / "test_secret.py", root / "tests" / "test_link.py")
    assert "tests/test_link.py" not in (related_tests(root, ["tests/test_link.py"]) or ())


def test_stdlib_shadows_and_import_cycles_stay_in_the_tree(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            "json.py": "raise SystemExit('repository code must never run')\n",
            "a.py": "import b\n",
            "b.py": "import a\n",
            "tests/test_json.py": "import json\n",
            "tests/test_cycle.py": "import a\n",
            "tests/test_plain.py": "x = 1\n",
        },
    )
    assert related_tests(root, ["json.py"]) == ("tests/test_json.py",)
    assert related_tests(root, ["b.py", "a.py"]) == ("tests/test_cycle.py",)
    # the selection is made in a process that imports the shadowing json: parsing only
    code = (
        "import sys; from pathlib import Path; from looprun.checks.related import related_tests;"
        f"print(related_tests(Path({str(root)!r}), ['json.py']))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "('tests/test_json.py',)"
