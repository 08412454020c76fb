"""What changed between two snapshots of the working tree, file by file, and the
doctest examples a file holds, so protected tests and doctests can be checked on the
real change rather than on what a tool call said it did."""

from __future__ import annotations

import doctest
from collections import Counter
from dataclasses import dataclass

# Files whose text may hold doctest examples (docstrings, or text documents run by
# ``python -m doctest`` / ``pytest --doctest-glob``).
DOCTEST_SUFFIXES = (".py", ".pyi", ".rst", ".txt", ".md")


@dataclass(frozen=True)
class FileChange:
    """One changed path: ``status`` is A (added), M (modified), D (deleted) or T (type
    changed); ``old``/``new`` hold the text when it was asked for and is text."""

    path: str
    status: str
    old: str | None = None
    new: str | None = None


def doctest_examples(text: str, name: str = "<file>") -> Counter[tuple[str, str]]:
    """The (source, expected output) of every doctest example in ``text``, with
    indentation normalised; an unparsable file has none."""
    parser = doctest.DocTestParser()
    try:
        parts = parser.parse(text, name)
    except ValueError:  # inconsistent indentation: not a doctest doctest can run either
        return Counter()
    return Counter(
        (p.source.strip(), p.want.strip()) for p in parts if isinstance(p, doctest.Example)
    )


def lost_examples(old: str, new: str | None) -> list[tuple[str, str]]:
    """Doctest examples of ``old`` that ``new`` no longer holds unchanged (changed
    expectations, removed examples); examples added to ``new`` are fine."""
    before = doctest_examples(old)
    if not before:
        return []
    after = doctest_examples(new or "")
    return sorted((before - after).elements())
