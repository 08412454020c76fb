"""What changed between two snapshots of the working tree, file by file, and the
doctest examples a file holds, so protected tests and doctests can be checked on the
real change rather than on what a tool call said it did."""

from __future__ import annotations

from collections import Counter

from looprun.data.value import valueclass

# Files whose text may hold doctest examples (docstrings, or text documents run by
# ``python -m doctest`` / ``pytest --doctest-glob``).
DOCTEST_SUFFIXES = (".py", ".pyi", ".rst", ".txt", ".md")
PROMPT, CONTINUATION = ">>>", "..."


def is_test_file(path: str) -> bool:
    """A pytest test module by its name (``test_*.py`` or ``*_test.py``)."""
    base = path.rsplit("/", 1)[-1]
    return base.endswith(".py") and (base.startswith("test_") or base.endswith("_test.py"))


@valueclass
class FileChange:
    """One changed path: ``status`` is A (added), M (modified), D (deleted) or T (type
    changed); ``old``/``new`` hold the text when it was asked for and is text."""

    path: str
    status: str
    old: str | None = None
    new: str | None = None


def doctest_examples(text: str) -> Counter[tuple[str, str]]:
    """The (source, expected output) of every doctest example in ``text``, indentation
    stripped: a ``>>>`` line with its ``...`` continuations, then the expected output up
    to a blank line or the next ``>>>``.

    Read line by line rather than with ``doctest.DocTestParser`` on the whole file,
    which gives up on a module at the first docstring it finds inconsistent."""
    out: Counter[tuple[str, str]] = Counter()
    lines = [ln.strip() for ln in text.splitlines()]
    i = 0
    while i < len(lines):
        if not lines[i].startswith(PROMPT):
            i += 1
            continue
        source = [lines[i][4:]]
        i += 1
        while i < len(lines) and lines[i].startswith(CONTINUATION):
            source.append(lines[i][4:])
            i += 1
        want = []
        while i < len(lines) and lines[i] and not lines[i].startswith(PROMPT):
            want.append(lines[i])
            i += 1
        out[("\n".join(source).strip(), "\n".join(want))] += 1
    return out


def lost_examples(old: str, new: str | None) -> list[tuple[str, str]]:
    """Doctest examples of ``old`` that ``new`` no longer holds unchanged (changed
    expectations, removed examples); examples added to ``new`` are fine."""
    before = doctest_examples(old)
    if not before:
        return []
    after = doctest_examples(new or "")
    return sorted((before - after).elements())
