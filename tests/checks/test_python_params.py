"""Which test files the baseline may trust to name their parametrized cases the same on
every run, read from their text: literals only, never a set, a computation or a hook."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from functools import partial
from pathlib import Path

import pytest

from looprun.checks.related import tree_text
from looprun.checks.stacks.python_params import literal_module, varying

HEAD = "import pytest\n\n"

VOUCHED = {
    "a literal list": (
        "@pytest.mark.parametrize('a', [1, 2, 'x', None, -3, 2.5])\ndef test_f(a): ..."
    ),
    "tuples bound to a name": (
        "CASES = (('a', 'b'), ('c', 'd'))\n\n"
        "@pytest.mark.parametrize(('x', 'y'), CASES)\ndef test_f(x, y): ..."
    ),
    "names joined with +": (
        "ONE = [(1, 2)]\nTWO = [(3, 4)]\n\n"
        "@pytest.mark.parametrize('x,y', ONE + TWO)\ndef test_f(x, y): ..."
    ),
    "a literal dict's items": (
        "D = {'a': 1, 'b': 2}\n\n@pytest.mark.parametrize('k,v', D.items())\ndef test_f(k, v): ..."
    ),
    "pytest.param with marks and an id": (
        "@pytest.mark.parametrize('a', [pytest.param(1, id='one', marks=pytest.mark.slow),"
        " 2])\ndef test_f(a): ..."
    ),
    "keywords and literal ids": (
        "@pytest.mark.parametrize(argnames='a', argvalues=[1, 2], ids=['x', 'y'], "
        "indirect=False)\ndef test_f(a): ..."
    ),
    "a module-wide mark": "pytestmark = pytest.mark.parametrize('a', [1, 2])\n\ndef test_f(a): ...",
    "a fixture with literal params": (
        "@pytest.fixture(params=['sqlite', 'memory'], ids=['s', 'm'])\n"
        "def db(request):\n    return request.param\n\ndef test_f(db): ..."
    ),
    "a name read by the tests too": (
        "CASES = [(1, 2)]\n\n@pytest.mark.parametrize('a,b', CASES)\ndef test_f(a, b): ...\n\n"
        "def test_count():\n    assert len(CASES) == 1 and CASES[0] in CASES\n"
        "    for a, b in CASES:\n        assert a < b\n"
    ),
    "no parametrization at all": "def test_f():\n    assert sorted({3, 1}) == [1, 3]",
}

NOT_VOUCHED = {
    "a set display": "@pytest.mark.parametrize('a', {'x', 'y'})\ndef test_f(a): ...",
    "a set bound to a name": (
        "S = {'x', 'y'}\n\n@pytest.mark.parametrize('a', S)\ndef test_f(a): ..."
    ),
    "a set inside a tuple": "@pytest.mark.parametrize('a', [({'x', 'y'},)])\ndef test_f(a): ...",
    "a comprehension": (
        "import m\n\n@pytest.mark.parametrize('a', [(w,) for w in m.WORDS])\ndef test_f(a): ..."
    ),
    "a call": (
        "import itertools\n\n@pytest.mark.parametrize('a,b', itertools.combinations('abc', 2))\n"
        "def test_f(a, b): ..."
    ),
    "an imported name": (
        "from data import CASES\n\n@pytest.mark.parametrize('a', CASES)\ndef test_f(a): ..."
    ),
    "a name bound twice": (
        "CASES = [1]\nCASES = list(CASES) + [2]\n\n@pytest.mark.parametrize('a', CASES)\n"
        "def test_f(a): ..."
    ),
    "a list changed after it is bound": (
        "import random\nCASES = [1, 2]\nCASES.append(random.random())\n\n"
        "@pytest.mark.parametrize('a', CASES)\ndef test_f(a): ..."
    ),
    "a list handed to a function": (
        "import random\nCASES = [1, 2, 3]\nrandom.shuffle(CASES)\n\n"
        "@pytest.mark.parametrize('a', CASES)\ndef test_f(a): ..."
    ),
    "a list an alias changes": (
        "CASES = [1]\nMORE = CASES\nMORE += [object()]\n\n@pytest.mark.parametrize('a', CASES)\n"
        "def test_f(a): ..."
    ),
    "a name rebound from a function": (
        "CASES = [1]\n\ndef setup_module():\n    global CASES\n    CASES = [2]\n\n"
        "@pytest.mark.parametrize('a', CASES)\ndef test_f(a): ..."
    ),
    "an id function": (
        "@pytest.mark.parametrize('a', [1, 2], ids=lambda v: str(id(v)))\ndef test_f(a): ..."
    ),
    "pytest.param of a computed value": (
        "import time\n\n@pytest.mark.parametrize('a', [pytest.param(time.time())])\n"
        "def test_f(a): ..."
    ),
    "a fixture with computed params": (
        "import os\n\n@pytest.fixture(params=os.listdir('.'))\ndef f(request):\n"
        "    return request.param\n\ndef test_f(f): ..."
    ),
    "a generate hook": (
        "def pytest_generate_tests(metafunc):\n    metafunc.parametrize('a', [1])\n\n"
        "def test_f(a): ..."
    ),
    "a plugin list": "pytest_plugins = ['myplugin']\n\ndef test_f(a): ...",
    "a starred join": ("ONE = [1]\n\n@pytest.mark.parametrize('a', [*ONE, 2])\ndef test_f(a): ..."),
    "not Python": "def test_f(:\n",
}


@pytest.mark.parametrize("name", sorted(VOUCHED))
def test_literal_parametrizations_are_vouched_for(name: str) -> None:
    assert literal_module(HEAD + VOUCHED[name]) is True


@pytest.mark.parametrize("name", sorted(NOT_VOUCHED))
def test_anything_else_is_not(name: str) -> None:
    assert literal_module(HEAD + NOT_VOUCHED[name]) is False


def _reader(files: dict[str, str]):  # type: ignore[no-untyped-def]
    def read(path: str) -> str | None:
        if path == "tests/unreadable.py":
            raise OSError("a link out of the tree")
        return files.get(path)

    return read


def test_a_conftest_above_a_file_counts_and_a_missing_file_is_unsure() -> None:
    literal = HEAD + VOUCHED["a literal list"]
    files = {
        "tests/a/test_one.py": literal,
        "tests/b/test_two.py": literal,
        "tests/b/conftest.py": HEAD + NOT_VOUCHED["a generate hook"],
        "test_top.py": HEAD + NOT_VOUCHED["a set display"],
    }
    read = _reader(files)
    assert varying(read, ["tests/a/test_one.py"]) == ()
    assert varying(read, ["tests/a/test_one.py", "tests/b/test_two.py", "test_top.py"]) == (
        "tests/b/test_two.py",
        "test_top.py",
    )
    # a hook in the root conftest reaches every file
    files["conftest.py"] = HEAD + NOT_VOUCHED["a fixture with computed params"]
    assert varying(read, ["tests/a/test_one.py"]) == ("tests/a/test_one.py",)
    assert varying(read, ["tests/gone.py"]) is None
    assert varying(read, ["tests/unreadable.py"]) is None


# a set's order follows the hash seed, a literal's never does: what the reading says,
# pytest does, run under two seeds
SET_IDS = "@pytest.mark.parametrize('a,b', [tuple({'apple', 'fig', 'kiwi', 'plum'})[:2]])\n"


@pytest.mark.parametrize(
    ("body", "same"),
    [
        ("@pytest.mark.parametrize('a', [('x', 1), ('y', 2)])\ndef test_f(a): ...\n", True),
        (SET_IDS + "def test_f(a, b): ...\n", False),
    ],
    ids=["literal", "set"],
)
def test_the_reading_agrees_with_pytest(tmp_path: Path, body: str, same: bool) -> None:
    (tmp_path / "test_p.py").write_text(HEAD + textwrap.dedent(body))

    def ids(seed: int) -> list[str]:
        out = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": str(seed), "PYTHONDONTWRITEBYTECODE": "1"},
        )
        return [line for line in out.stdout.splitlines() if "::" in line]

    seen = {tuple(ids(seed)) for seed in range(1, 7)}
    assert all(seen), seen
    assert (len(seen) == 1) is same
    assert literal_module((tmp_path / "test_p.py").read_text()) is same


def test_a_file_nested_past_the_parser_is_not_vouched_for_and_raises_nothing() -> None:
    # about 1 MB: under the size read, past what ast builds (RecursionError)
    deep = "CASES = " + "+".join(["(1,)"] * 200_000) + "\n"
    assert literal_module(HEAD + deep + VOUCHED["a literal list"]) is False


def test_the_tree_is_read_as_its_own_files_only(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test_a.py").write_text(HEAD + VOUCHED["tuples bound to a name"])
    outside = tmp_path / "elsewhere.py"
    outside.write_text(HEAD + VOUCHED["a literal list"])
    read = partial(tree_text, root)
    assert varying(read, ["tests/test_a.py"]) == ()
    assert read("tests/missing.py") is None
    # a conftest linked out of the tree: not read, so nothing is vouched for
    (root / "conftest.py").symlink_to(outside)
    assert varying(read, ["tests/test_a.py"]) is None
    (root / "conftest.py").unlink()
    (root / "conftest.py").mkdir()  # not a file
    assert varying(read, ["tests/test_a.py"]) is None
    (root / "conftest.py").rmdir()
    # a test file larger than test files are read
    (root / "tests" / "test_a.py").write_text(HEAD + "X = 1\n" * 400_000)
    assert varying(read, ["tests/test_a.py"]) is None
