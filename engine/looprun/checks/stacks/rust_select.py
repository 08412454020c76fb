"""How ``cargo test`` is narrowed to some integration tests: ``--test TARGET`` for each of
their test binaries, then libtest's ``--exact`` filters of their names.

Ids are the cargo_test parser's: ``tests/NAME.rs::test`` for an integration test (the path
relative to its package, ``BIN@tests/NAME.rs::test`` where two packages of a workspace have
that path). A variants file sits beside the reproducing test, one more file of that
``tests/`` directory, so it is one more test binary of the package; only its top-level
``#[test]`` functions are read (a test inside a module is ``module::test`` to libtest, and
the prompt asks for none).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# `#[test]` at the start of a line (a top-level item), other attributes after it, then the
# function: `fn name(`, `pub fn name(`
_TEST_FN = re.compile(
    r"^#\[test\][ \t]*\n(?:[ \t]*(?://[^\n]*|#\[[^\n]*\])[ \t]*\n)*"
    r"(?:pub(?:\([^)\n]*\))?\s+)?fn\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(",
    re.M,
)
# an integration test's source, relative to its package, as cargo names it
_TARGET = re.compile(r"^(?:([A-Za-z0-9_-]+)@)?tests/([A-Za-z0-9_-]+)(?:\.rs|/main\.rs)$")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)*$")


def test_ids(path: str, text: str) -> tuple[str, ...]:
    """The ids (``tests/NAME.rs::test``) of the top-level tests in the file ``path`` (root
    relative) holding ``text``; none when it is not an integration test's source."""
    parts = path.split("/")
    if len(parts) < 2 or parts[-2] != "tests" or not parts[-1].endswith(".rs"):
        return ()
    label = f"tests/{parts[-1]}"
    if not _TARGET.match(label):
        return ()
    names = dict.fromkeys(m[1] for m in _TEST_FN.finditer(text))
    return tuple(f"{label}::{name}" for name in names)


def select(ids: Sequence[str]) -> tuple[str, ...]:
    """``cargo test`` arguments running exactly ``ids``: each test binary once, then
    ``-- --exact`` and the names (a name is a Rust path: nothing a shell or libtest reads
    as an option)."""
    targets: dict[str, None] = {}
    names: dict[str, None] = {}
    for test_id in ids:
        label, sep, name = test_id.partition("::")
        found = _TARGET.match(label)
        if not sep or found is None or not _NAME.match(name):
            raise ValueError(f"not the id of an integration test: {test_id!r}")
        targets[found[2]] = None
        names[name] = None
    if not names:
        raise ValueError("no test to select")
    return (*(w for t in targets for w in ("--test", t)), "--", "--exact", *names)
