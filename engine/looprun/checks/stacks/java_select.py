"""How Maven's Surefire is narrowed to some test methods: ``-Dtest=CLASS#m1+m2,...``.

Ids are the surefire parser's, Maven's own: ``com.acme.FooTest.method`` (the class's fully
qualified name, then the method). A variants file sits beside the reproducing test, in its
package; its test class and ``@Test`` methods are read from its text (never compiled
here). A module of a multi-module build that has no such class runs no test rather than
failing the build (``surefire.failIfNoSpecifiedTests=false``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_PACKAGE = re.compile(r"^\s*package\s+([A-Za-z_]\w*(?:\s*\.\s*[A-Za-z_]\w*)*)\s*;", re.M)
# a top-level class (at the start of a line, as a formatter leaves it)
_CLASS = re.compile(r"^(?:(?:public|final|abstract)\s+)*class\s+([A-Za-z_]\w*)", re.M)
_ANNOTATION = r"@[\w.]+(?:\s*\([^)]*\))?\s+"
_MODIFIERS = r"(?:(?:public|protected|private|static|final|synchronized)\s+)*"
# JUnit 4 and 5's @Test (not @TestFactory or @TestTemplate), other annotations after it,
# then a void method
_TEST_METHOD = re.compile(
    rf"@(?:org\.junit\.(?:jupiter\.api\.)?)?Test\b(?:\s*\([^)]*\))?\s+(?:{_ANNOTATION})*"
    rf"{_MODIFIERS}void\s+([A-Za-z_]\w*)\s*\("
)
_CLASS_NAME = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")
_METHOD = re.compile(r"^[A-Za-z_]\w*$")


def test_ids(path: str, text: str) -> tuple[str, ...]:
    """The ids (``pkg.Class.method``) of the ``@Test`` methods of the test class the file
    ``path`` holding ``text`` declares; none when it is no Java source or has no class."""
    if not path.endswith(".java"):
        return ()
    found = _CLASS.search(text)
    if found is None:
        return ()
    package = _PACKAGE.search(text)
    prefix = re.sub(r"\s+", "", package[1]) + "." if package else ""
    names = dict.fromkeys(m[1] for m in _TEST_METHOD.finditer(text))
    return tuple(f"{prefix}{found[1]}.{name}" for name in names)


def select(ids: Sequence[str]) -> tuple[str, ...]:
    """Maven options running exactly ``ids``: one ``-Dtest`` with each class once and its
    methods (plain Java names: nothing Surefire reads as a pattern)."""
    classes: dict[str, dict[str, None]] = {}
    for test_id in ids:
        cls, _, method = test_id.rpartition(".")
        if not _CLASS_NAME.match(cls) or not _METHOD.match(method):
            raise ValueError(f"not the id of a java test method: {test_id!r}")
        classes.setdefault(cls, {})[method] = None
    if not classes:
        raise ValueError("no test to select")
    chosen = ",".join(f"{cls}#{'+'.join(methods)}" for cls, methods in classes.items())
    return (f"-Dtest={chosen}", "-Dsurefire.failIfNoSpecifiedTests=false")
