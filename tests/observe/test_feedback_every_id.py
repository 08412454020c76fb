"""Feedback names every failing id within its byte budget: ids grouped by their natural
prefix (a pytest file, a go test, a rust module, a Java class), numeric runs as ranges,
grouped tighter as the room asks; only what even that cannot fit is counted, never
silently dropped."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from looprun.observe.base import Item, ParseInput
from looprun.observe.feedback import render
from looprun.observe.junit import JUnitParser

_NUMBER = re.compile(r"0|[1-9]\d*")


def _split(text: str) -> list[str]:
    """``text`` cut at the ``, `` that are outside braces and brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch in "{[") - (ch in "}]")
        if depth == 0 and text.startswith(", ", i):
            parts.append(text[start:i])
            start = i + 2
    parts.append(text[start:])
    return [p for p in parts if p]


def _values(part: str) -> list[str]:
    low, dash, high = part.partition("-")
    if dash and _NUMBER.fullmatch(low) and _NUMBER.fullmatch(high):
        return [str(n) for n in range(int(low), int(high) + 1)]
    return [part]


def expand(text: str) -> set[str]:
    """The ids a grouped list names: ``f::{a[1-3, x], b}`` is f::a[1], f::a[2], f::a[3],
    f::a[x] and f::b; ``t_{0-2}_x`` is t_0_x, t_1_x and t_2_x."""
    out: set[str] = set()
    for chunk in text.split("; "):
        out |= _expand_one(chunk)
    return out


def _expand_one(text: str) -> set[str]:
    start = next((i for i, ch in enumerate(text) if ch in "{["), None)
    if start is None:
        return {text}
    depth = 0
    for end in range(start, len(text)):
        depth += (text[end] in "{[") - (text[end] in "}]")
        if depth == 0:
            break
    head, inner, tail = text[:start], text[start + 1 : end], text[end + 1 :]
    rests = _expand_one(tail) if tail else {""}
    out: set[str] = set()
    for alt in _split(inner):
        if text[start] == "[":
            middles = {f"[{v}]" for v in _values(alt)}
        elif "{" in alt or "[" in alt:
            middles = _expand_one(alt)
        else:
            middles = set(_values(alt))
        out |= {head + m + r for m in middles for r in rests}
    return out


def named(feedback: str, failing: list[str]) -> tuple[set[str], int]:
    """The failing ids the feedback names (on a line of their own, in a group's ids, or on
    the last line) and how many it says it left unnamed."""
    found = {
        tid
        for tid in failing
        if tid in feedback  # a quick test first: one pattern per id is slow for thousands
        and re.search(rf"^{re.escape(tid)}(?: \(|: |$)", feedback, re.M)  # a line of its own
    }
    for ids in re.findall(r"^  ids: (.*)$", feedback, flags=re.M):
        if ids != "on the last line":
            found |= expand(ids)
    rest = re.search(
        r"^\.\.\. (?:and \d+ more failing|the \d+ failing ids): (.*)$", feedback, flags=re.M
    )
    left = 0
    if rest:
        line = rest.group(1)
        count = re.search(r"(?:^|; )(\d+) not named$", line)
        if count:
            left = int(count.group(1))
            line = line[: count.start()]
        if line:
            found |= expand(line.replace(", …}", "}").replace("{…}", ""))
    return found, left


def _pytest(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _observe(root: Path, *args: str) -> dict:
    run = subprocess.run(
        [sys.executable, "-m", "looprun", "observe", *args, "--workdir", "."],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1, run.stderr
    return json.loads(run.stdout)


LONG = "is_doubled_for_every_input_the_pricing_service_accepts"


def test_sixty_long_ids_from_a_10mb_pytest_log_are_all_named(tmp_path: Path) -> None:
    """60 tests, each failing at its own line with its own message, names too long to list
    one by one in 4 KB: the rest are grouped tighter (their numbers as a range)."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "calc.py").write_text("def double(n):\n    return n * 2 + 1\n")
    body = ["from calc import double\n\nNOISE = 'captured debug output 0123456789\\n' * 5000\n"]
    body += [
        f"\n\ndef test_value_{n}_{LONG}():\n    print(NOISE)\n"
        f"    assert double({n}) == {n * 2}, 'value {n}'\n"
        for n in range(60)
    ]
    (tmp_path / "tests" / "test_values.py").write_text("".join(body))
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\npythonpath = ['.']\n")
    run = _pytest(tmp_path, "-v", "tests")
    (tmp_path / "pytest.log").write_text(run.stdout)
    assert run.returncode == 1 and len(run.stdout) > 9_000_000
    ids = re.findall(r"^FAILED (tests/test_values\.py::\S+)", run.stdout, flags=re.M)
    assert len(ids) == 60
    obs = _observe(tmp_path, "regex", "pytest.log", "-o", "preset=pytest")
    feedback = obs["feedback"]
    assert len(feedback.encode()) <= 4096
    found, left = named(feedback, ids)
    assert left == 0 and "not named" not in feedback
    assert found >= set(ids), sorted(set(ids) - found)[:5]
    # details for the first failures, then the rest on one line as a range of numbers
    assert f"tests/test_values.py::test_value_0_{LONG} (tests/test_values.py:" in feedback
    assert re.search(
        rf"more failing: tests/test_values\.py::test_value_\{{\d+-59\}}_{LONG}$", feedback, re.M
    )


PARAMETRIZED = """\
import pytest


@pytest.mark.parametrize("n", range(505))
def test_price_is_rounded(n):
    assert n % 97 == 96, "not rounded"
"""


def test_five_hundred_parametrized_ids_as_ranges_within_a_small_budget(tmp_path: Path) -> None:
    """500 failing parameters of one test (5 pass between them) fit in 1 KB as runs."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_price.py").write_text(PARAMETRIZED)
    run = _pytest(tmp_path, "-q", "--tb=line", "--junitxml=junit.xml", "tests")
    assert run.returncode == 1, run.stdout[-2000:]
    obs = _observe(tmp_path, "junit", "junit.xml", "-o", "max_feedback=1024")
    feedback = obs["feedback"]
    assert obs["failed"] == 500 and len(feedback.encode()) <= 1024
    assert (
        "tests/test_price.py::test_price_is_rounded"
        "[0-95, 97-192, 194-289, 291-386, 388-483, 485-504]" in feedback
    )
    found, left = named(feedback, obs["failing"])
    assert left == 0 and found >= set(obs["failing"])


def _word(n: int) -> str:
    """A name with no number and no prefix it shares with its neighbours."""
    letters = "qwertyuiopasdfghjklzxcvbnm"
    out, n = [], n * 7919 + 104729
    while n:
        n, r = divmod(n, 26)
        out.append(letters[r])
    return "".join(out)


def _junit(path: Path, failing: int) -> list[str]:
    cases = [
        f'<testcase classname="tests.test_m{n % 9}" name="check_{_word(n)}_{_word(n + 1)}">'
        f'<failure message="broken {_word(n)}">E   broken</failure></testcase>'
        for n in range(failing)
    ]
    path.write_text("<testsuites><testsuite>" + "".join(cases) + "</testsuite></testsuites>")
    return [f"tests.test_m{n % 9}.check_{_word(n)}_{_word(n + 1)}" for n in range(failing)]


def test_what_cannot_fit_is_counted_exactly(tmp_path: Path) -> None:
    """2,000 (then 7,000: more than are kept as items) distinct names cannot all fit in
    4 KB: the names that fit are real failing ids and the count says how many are not."""
    for total in (2000, 7000):
        report = tmp_path / f"r{total}.xml"
        ids = _junit(report, total)
        obs = JUnitParser().parse(ParseInput(workdir=tmp_path, file=report))
        assert obs.counts["failed"] == total
        feedback = obs.feedback
        assert len(feedback.encode()) <= 4096
        found, left = named(feedback, ids)
        assert re.search(rf"; {left} not named$", feedback, re.M), feedback[-300:]
        assert found <= set(ids) and len(found & set(ids)) + left == total


STACKS = {
    # go: package directory / test / subtest
    "go": [f"internal/parse/TestParse/case_{n}" for n in range(40)]
    + ["internal/parse/TestParse/empty", "internal/lex/TestLex"],
    # rust: crate::module::tests::name
    "rust": [f"invoice::money::tests::rounds_{n}_cents" for n in range(40)]
    + ["invoice::money::tests::zero", "invoice::tax::tests::vat"],
    # java (Surefire): Class.method, parametrized methods in brackets
    "java": [f"com.acme.CalcTest.testAdd[{n}]" for n in range(40)]
    + ["com.acme.CalcTest.testSub", "com.acme.TaxTest.testVat"],
    # node's runner: file::suite::name
    "node": [f"test/calc.test.js::add::adds {n} and 1" for n in range(40)]
    + ["test/calc.test.js::add::adds nothing", "test/tax.test.js::vat"],
}
GROUPED = {
    "go": "internal/parse/TestParse/{case_",
    "rust": "invoice::money::tests::{rounds_",
    "java": "com.acme.CalcTest.{testAdd[",
    "node": "test/calc.test.js::add::{adds ",
}


def test_ids_of_every_stack_are_grouped_by_their_natural_prefix() -> None:
    for stack, ids in STACKS.items():
        items = [
            Item(id=tid, message=f"{stack} failure {_word(n)}", severity="failure")
            for n, tid in enumerate(ids)
        ]
        feedback = render(
            "tests: 42 failed", items, max_bytes=1200, group=True, noun="more failing"
        )
        assert len(feedback.encode()) <= 1200
        assert GROUPED[stack] in feedback, (stack, feedback)
        found, left = named(feedback, ids)
        assert left == 0 and found >= set(ids), (stack, sorted(set(ids) - found)[:3])


def test_numbers_written_with_leading_zeros_are_not_ranges() -> None:
    """``test_01`` and ``test_02`` stay as written: a range would name ``test_1``."""
    ids = [f"tests/t.py::test_{n:02d}" for n in range(1, 4)] + ["tests/t.py::test_x[007]"]
    items = [Item(id=tid, message=f"m {_word(n)}", severity="failure") for n, tid in enumerate(ids)]
    feedback = render("h", items, max_bytes=256, group=True, noun="more failing")
    found, _ = named(feedback, ids)
    assert found >= set(ids) and "test_x[7]" not in feedback


def test_parameters_that_read_as_ranges_are_written_as_they_are() -> None:
    """pytest joins several parameters with ``-`` (``test_add[1-2]``): in such a test no
    numbers become ranges, so ``[1-2, 3-4]`` names exactly those two ids."""
    ids = ["tests/t.py::test_add[1-2]", "tests/t.py::test_add[3-4]", "tests/t.py::test_add[5]"]
    ids += [f"tests/t.py::test_sub[{n}]" for n in range(10)]
    items = [Item(id=tid, message="boom", severity="failure") for tid in ids]
    feedback = render("h", items, max_bytes=256, group=True, noun="more failing")
    assert "ids: tests/t.py::{test_add[1-2, 3-4, 5], test_sub[0-9]}" in feedback
