"""`looprun bugfix` on a repository whose parametrized test ids change from run to run.

The test is parametrized over pairs of a set of strings: which of two words comes first
follows the set's hash order, so each pytest process (a new ``PYTHONHASHSEED``) names most
cases differently. The baseline lists such a file's tests in another process (pytest's
collection, nothing run), runs it a second time where the list names an id otherwise, and
learns which ids are unstable; a case renamed by a later run is then matched by file and
function and is not a vanished test, while a case that really stopped running still is.
A repository whose collection names its cases otherwise than its runs do gains nothing:
a list only ever spares a second run, it never marks an id unstable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import git_init, journal_events, scripted_bugfix

_CODE = (
    '"""A few words and what can be said about them."""\n\n'
    'WORDS = {"apple", "banana", "cherry", "damson", "elder", "fig", "grape", "hazel"}\n\n\n'
    "def vowels(word: str) -> int:\n"
    '    return sum(1 for c in word if c in "aeio")\n'
)
_TESTS = (
    "import itertools\n\nimport pytest\n\nfrom words import WORDS, vowels\n\n\n"
    '@pytest.mark.parametrize("a,b", itertools.combinations(WORDS, 2))\n'
    "def test_words_differ(a, b):\n    assert a != b\n\n\n"
    'def test_apple_has_two_vowels():\n    assert vowels("apple") == 2\n'
)
_REPRO = 'from words import vowels\n\n\ndef test_u_is_a_vowel():\n    assert vowels("fruit") == 2\n'
_BUG = ('c in "aeio"', 'c in "aeiou"')


def _project(tmp: Path) -> Path:
    work = tmp / "words"
    (work / "tests").mkdir(parents=True)
    (work / "words.py").write_text(_CODE)
    (work / "tests" / "test_words.py").write_text(_TESTS)
    # no parameters: the baseline's second run leaves this file out
    plain = 'from words import vowels\n\n\ndef test_fig():\n    assert vowels("fig") == 1\n'
    (work / "tests" / "test_plain.py").write_text(plain)
    return git_init(work)


def _call(name: str, **arguments: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def _run(work: Path, fix: dict[str, Any]) -> dict[str, Any]:
    turns = [
        _call("write_file", path="tests/test_fruit.py", content=_REPRO),
        {"text": "The new test fails: vowels('fruit') is 1."},
        fix,
        {"text": "Fixed."},
    ]
    # every pytest process draws its own hash seed, as it does by default
    return scripted_bugfix(
        work,
        turns,
        "vowels() does not count 'u'.",
        "--max-iterations",
        "3",
        env={"PYTHONHASHSEED": "random"},
        timeout=600,
    )


def _events(summary: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return journal_events(summary["run_dir"], kind)


def test_an_honest_fix_ends_done_though_parametrized_ids_change(tmp_path: Path) -> None:
    work = _project(tmp_path)
    summary = _run(work, _call("edit_file", path="words.py", old=_BUG[0], new=_BUG[1]))

    assert (summary["outcome"], summary["iterations"]) == ("done", 2), summary["stderr"]
    (baseline,) = _events(summary, "baseline")
    unstable = baseline["unstable"]["tests"]
    assert unstable and all("test_words_differ[" in i for i in unstable)
    # the second run was of the file holding parametrized ids alone: the other file's
    # tests were not taken as vanished from it (the fix's run below passes them all)
    assert not any("test_plain" in i for i in unstable)


def test_a_case_dropped_from_the_data_still_vanishes(tmp_path: Path) -> None:
    """The fix also drops a word the test is parametrized over: seven of its cases stop
    running, which no rename explains."""
    work = _project(tmp_path)
    fix = _call(
        "write_file",
        path="words.py",
        content=_CODE.replace(_BUG[0], _BUG[1]).replace(', "hazel"', ""),
    )
    summary = _run(work, fix)

    assert summary["outcome"] != "done", summary["stderr"]
    iterations = _events(summary, "iteration")
    assert iterations[1]["decision"]["rule"] == "vanished", iterations[1]["decision"]
    said = iterations[1]["decision"]["message"]
    assert said.count("test_words_differ[") == 7, said


# every pytest session the checks start, with its time, whether it only listed the tests
# (`--collect-only`) and the paths it was given
_SESSIONS = (
    "import time\n\n\ndef pytest_sessionstart(session):\n"
    "    kind = 'list' if session.config.option.collectonly else 'run'\n"
    "    with open({log!r}, 'a') as fh:\n"
    "        fh.write(f'{{time.time()}} {{kind}} {{\" \".join(session.config.args)}}\\n')\n"
)
_LITERAL = (
    "import pytest\n\nfrom words import vowels\n\n"
    "COUNTS = (('apple', 2), ('fig', 1), ('kiwi', 2))\n\n\n"
    '@pytest.mark.parametrize("word,count", COUNTS)\n'
    "def test_counts(word, count):\n    assert vowels(word) == count\n"
)
# a conftest names the cases of every test asking for `word` (or for `a` and `b`): no file
# holding them can be vouched for by reading it, so the baseline looks again
_GENERATED = "def test_generated(word):\n    assert word == word.lower()\n"
_GENERATED_PAIRS = "def test_generated_pairs(a, b):\n    assert a != b\n"
_GENERATE = (
    "import itertools\n\nfrom words import WORDS\n\n\n"
    "def pytest_generate_tests(metafunc):\n"
    "    if 'word' in metafunc.fixturenames:\n"
    "        metafunc.parametrize('word', sorted(WORDS))\n"
    "    if 'b' in metafunc.fixturenames:  # pairs in the set's order, which each process draws\n"
    "        metafunc.parametrize('a,b', list(itertools.combinations(WORDS, 2)))\n"
)


def _baseline(
    tmp_path: Path, files: dict[str, str], conftest: str = ""
) -> tuple[list[list[str]], dict[str, Any]]:
    """The pytest sessions the baseline started, each as its kind (``run`` or ``list``)
    and the paths it was given, and the run's baseline event. ``files``: test files under
    ``tests/`` beside ``test_plain.py`` (``test_words.py``, the set's pairs, is dropped);
    ``conftest``: the root conftest's own code, after the sessions' log."""
    work = _project(tmp_path)
    log = tmp_path / "sessions.log"
    (work / "conftest.py").write_text(_SESSIONS.format(log=str(log)) + "\n\n" + conftest)
    (work / "tests" / "test_words.py").unlink()
    for name, text in files.items():
        (work / "tests" / name).write_text(text)
    git_init(work)
    turns = [
        _call("write_file", path="tests/test_fruit.py", content=_REPRO),
        {"text": "The new test fails."},
        _call("edit_file", path="words.py", old=_BUG[0], new=_BUG[1]),
        {"text": "Fixed."},
    ]
    summary = scripted_bugfix(
        work,
        turns,
        "vowels() does not count 'u'.",
        "--sandbox",
        "off",  # the sessions' log is outside the tree
        env={"PYTHONHASHSEED": "random"},
        timeout=600,
    )
    assert summary["outcome"] == "done", summary["stderr"]
    (baseline,) = _events(summary, "baseline")
    lines = [line.split(" ") for line in log.read_text().splitlines()]
    return [line[1:] for line in lines if float(line[0]) < baseline["ts"]], baseline


def test_the_baseline_runs_again_only_the_files_whose_parameters_may_vary(
    tmp_path: Path,
) -> None:
    # the literal file's cases are named the same on every run: only the set's file is
    # looked at again, listed in another process, where its pairs are named otherwise,
    # so it runs again
    files = {"test_words.py": _TESTS, "test_literal.py": _LITERAL}
    (_, *again), baseline = _baseline(tmp_path / "mixed", files)
    assert again == [["list", "tests/test_words.py"], ["run", "tests/test_words.py"]], again
    assert any("test_words_differ[" in i for i in baseline["unstable"]["tests"])
    # literals only: the baseline runs the suite once
    sessions, baseline = _baseline(tmp_path / "literal", {"test_literal.py": _LITERAL})
    assert len(sessions) == 1 and "unstable" not in baseline, sessions


@pytest.mark.e2e
def test_cases_a_conftest_generates_are_listed_and_run_again_only_when_they_move(
    tmp_path: Path,
) -> None:
    """A conftest's ``pytest_generate_tests``: sorted cases are named alike by the list,
    so nothing runs a second time; pairs drawn in a set's order are named otherwise by
    it, so that file runs again and its ids are unstable."""
    files = {"test_generated.py": _GENERATED}
    (_, *again), baseline = _baseline(tmp_path / "sorted", files, _GENERATE)
    assert again == [["list", "tests/test_generated.py"]], again
    assert "unstable" not in baseline, baseline

    files = {**files, "test_generated_pairs.py": _GENERATED_PAIRS}
    (_, *again), baseline = _baseline(tmp_path / "set", files, _GENERATE)
    both = ["tests/test_generated.py", "tests/test_generated_pairs.py"]
    assert again == [["list", *both], ["run", "tests/test_generated_pairs.py"]], again
    unstable = baseline["unstable"]["tests"]
    assert unstable and all("test_generated_pairs[" in i for i in unstable), unstable


# a test of each of the code's words, whose cases a conftest names: as pytest runs them,
# or otherwise when it only collects them
_EACH_WORD = "def test_word(word):\n    assert word == word.lower()\n"
_GENERATE_WORD = (
    "from words import WORDS\n\n\n"
    "def pytest_generate_tests(metafunc):\n"
    "    if 'word' in metafunc.fixturenames:\n"
    "        words, ids = sorted(WORDS), None\n"
    "        if metafunc.config.option.collectonly:\n"
    "            {listing}\n"
    "        metafunc.parametrize('word', words, ids=ids)\n"
)
# what a hostile repository makes a collection-only session see, and a run never does
_LISTED_OTHERWISE = {
    # every case named otherwise: as many ids, none the run's
    "renamed": _GENERATE_WORD.format(listing="ids = ['listed-' + w for w in words]"),
    # the case the fix will drop is missing from the list
    "dropped": _GENERATE_WORD.format(listing="words.remove('hazel')"),
    # the test module itself looks at how pytest was started
    "argv": "",
}
_ARGV_WORD = (
    "import sys\n\nimport pytest\n\nfrom words import WORDS\n\n"
    "LISTING = '--collect-only' in sys.argv\n\n\n"
    '@pytest.mark.parametrize("word", sorted(WORDS), ids=lambda w: "l" + w if LISTING else w)\n'
    "def test_word(word):\n    assert word == word.lower()\n"
)


@pytest.mark.e2e
@pytest.mark.parametrize("how", sorted(_LISTED_OTHERWISE))
def test_a_list_unlike_the_run_cannot_hide_a_vanished_case(tmp_path: Path, how: str) -> None:
    """The repository (a conftest reading ``config.option.collectonly``, or the test
    module reading ``sys.argv``) names the cases otherwise, or leaves one out, when pytest
    only collects them. Taken as a second run, the list would make the cases it names
    otherwise unstable, and the fix's swap of a word for another (a case gone, a new one
    there) would read as a rename. The list only sends the file to a second run, which
    names every case as the first did: none is unstable, and the case the fix dropped
    has vanished."""
    work = _project(tmp_path)
    (work / "tests" / "test_words.py").unlink()
    conftest = _LISTED_OTHERWISE[how]
    (work / "tests" / "test_each_word.py").write_text(_EACH_WORD if conftest else _ARGV_WORD)
    if conftest:
        (work / "conftest.py").write_text(conftest)
    git_init(work)
    swapped = _CODE.replace(_BUG[0], _BUG[1]).replace('"hazel"', '"kiwi"')
    summary = _run(work, _call("write_file", path="words.py", content=swapped))

    assert summary["outcome"] != "done", summary["stderr"]
    (baseline,) = _events(summary, "baseline")
    assert "unstable" not in baseline, baseline
    iterations = _events(summary, "iteration")
    assert iterations[1]["decision"]["rule"] == "vanished", iterations[1]["decision"]
    assert "tests/test_each_word.py::test_word[hazel]" in iterations[1]["decision"]["message"]


# the list never ends: the session leaves before looprun's plugin has said it all
_CUT_SHORT = {
    "exits": (
        "import os\n\n\ndef pytest_collection_finish(session):\n"
        "    if session.config.option.collectonly:\n        os._exit(0)\n"
    ),
    "raises": (
        "def pytest_collection_finish(session):\n"
        "    if session.config.option.collectonly:\n"
        "        raise RuntimeError('no list here')\n"
    ),
}


@pytest.mark.e2e
@pytest.mark.parametrize("how", sorted(_CUT_SHORT))
def test_a_list_that_cannot_be_read_leaves_the_second_run(tmp_path: Path, how: str) -> None:
    """A collection-only session that ends before its list is whole is not read as
    "every id stable": the file runs a second time, as it would with no list, and the
    set's pairs are still found unstable."""
    (_, *again), baseline = _baseline(tmp_path, {"test_words.py": _TESTS}, _CUT_SHORT[how])
    assert again == [["list", "tests/test_words.py"], ["run", "tests/test_words.py"]], again
    unstable = baseline["unstable"]["tests"]
    assert unstable and all("test_words_differ[" in i for i in unstable), unstable
