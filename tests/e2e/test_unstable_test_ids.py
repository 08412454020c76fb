"""`looprun bugfix` on a repository whose parametrized test ids change from run to run.

The test is parametrized over pairs of a set of strings: which of two words comes first
follows the set's hash order, so each pytest process (a new ``PYTHONHASHSEED``) names most
cases differently. The baseline runs such a suite twice and learns which ids are unstable;
a case renamed by a later run is then matched by file and function and is not a vanished
test, while a case that really stopped running still is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


# every pytest session the checks start, with its time and the paths it was given
_SESSIONS = (
    "import time\n\n\ndef pytest_sessionstart(session):\n"
    "    with open({log!r}, 'a') as fh:\n"
    "        fh.write(f'{{time.time()}} {{\" \".join(session.config.args)}}\\n')\n"
)
_LITERAL = (
    "import pytest\n\nfrom words import vowels\n\n"
    "COUNTS = (('apple', 2), ('fig', 1), ('kiwi', 2))\n\n\n"
    '@pytest.mark.parametrize("word,count", COUNTS)\n'
    "def test_counts(word, count):\n    assert vowels(word) == count\n"
)


def _baseline_sessions(tmp_path: Path, with_set: bool) -> list[list[str]]:
    """The pytest sessions the baseline started, each as the paths it was given."""
    work = _project(tmp_path)
    log = tmp_path / "sessions.log"
    (work / "conftest.py").write_text(_SESSIONS.format(log=str(log)))
    (work / "tests" / "test_literal.py").write_text(_LITERAL)
    if not with_set:
        (work / "tests" / "test_words.py").unlink()
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
    seen = [line.split(" ")[1:] for line in log.read_text().splitlines()]
    stamps = [float(line.split(" ")[0]) for line in log.read_text().splitlines()]
    return [s for s, t in zip(seen, stamps, strict=True) if t < baseline["ts"]]


def test_the_baseline_runs_again_only_the_files_whose_parameters_may_vary(
    tmp_path: Path,
) -> None:
    # the literal file's cases are named the same on every run: only the set's file again
    _, *again = _baseline_sessions(tmp_path / "mixed", with_set=True)
    assert again == [["tests/test_words.py"]], again
    # literals only: the baseline runs the suite once
    assert len(_baseline_sessions(tmp_path / "literal", with_set=False)) == 1
