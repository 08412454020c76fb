"""How a node test runner is narrowed to some tests: their files, and one anchored
``--test-name-pattern`` of their names. Node's own runner reads that option; vitest's and
jest's command lines read it too (as ``--testNamePattern``, a JavaScript regular
expression matched against the test's full name), and take the files as filters.

Ids are the node_test parser's, ``FILE::NAME`` for a top-level test (``FILE::SUITE::NAME``
inside a suite, which a name pattern cannot single out, so it is not selected); a bare
path (no ``::``) selects a whole file, as the triage of a variants file does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# what a JavaScript regular expression (no `u` flag) reads as syntax, escaped one by one
_SPECIAL = re.compile(r"[\\^$.*+?()[\]{}|/-]")


def _escaped(name: str) -> str:
    return _SPECIAL.sub(lambda m: "\\" + m[0], name)


def select(ids: Sequence[str]) -> tuple[str, ...]:
    """``node --test`` arguments running exactly ``ids``: the name pattern first (node
    reads options only before the files), then each file once."""
    files: dict[str, None] = {}
    names: dict[str, None] = {}
    for test_id in ids:
        parts = test_id.split("::")
        if len(parts) > 2 or not parts[0] or parts[0].startswith("-"):
            raise ValueError(f"not a node test id of a top-level test: {test_id!r}")
        files[parts[0]] = None
        if len(parts) == 2:
            if not parts[1] or "\n" in parts[1]:
                raise ValueError(f"not a node test name: {test_id!r}")
            names[parts[1]] = None
    if not files:
        raise ValueError("no test to select")
    if names and len(names) != len(ids):
        raise ValueError("whole files and single tests cannot be selected together")
    pattern = (f"--test-name-pattern=^(?:{'|'.join(map(_escaped, names))})$",) if names else ()
    return (*pattern, *files)
