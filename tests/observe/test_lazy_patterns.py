"""Patterns that only a failing check needs are compiled when first used, not when every
run imports them; compiled, they answer as ``re.compile``'s result does."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from looprun.data.lazy_re import LazyPattern

# a fresh interpreter: the patterns re has compiled before and after the import
PROBE = """
import json, re, sys
import looprun.observe.feedback, looprun.data.lazy_re, dataclasses, functools, pathlib
before = {k[1] for k in re._cache}
import looprun.observe.traceback as tb
after = {k[1] for k in re._cache} - before
frame = tb.innermost('  File "src/app.py", line 3, in f\\nAssertionError', None)
print(json.dumps({"at_import": sorted(map(str, after)), "frame": [frame.file, frame.line]}))
"""


def test_importing_the_traceback_reader_compiles_none_of_its_patterns() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True
    )
    seen = json.loads(proc.stdout)
    assert not [p for p in seen["at_import"] if "line" in p or "site-packages" in p], seen
    assert seen["frame"] == ["src/app.py", 3]  # and they work once asked for


def test_a_lazy_pattern_answers_as_the_compiled_one() -> None:
    source, flags = r"(?P<file>\w+\.py):(?P<line>\d+)", re.IGNORECASE
    lazy, eager = LazyPattern(source, flags), re.compile(source, flags)
    text = "a.py:1 then B.PY:22 and c.txt:3"
    assert lazy.search(text).groupdict() == eager.search(text).groupdict()  # type: ignore[union-attr]
    assert lazy.match(text, 7) is None and eager.match(text, 7) is None
    assert [m.span() for m in lazy.finditer(text)] == [m.span() for m in eager.finditer(text)]
    assert lazy.findall(text) == eager.findall(text)
    assert lazy.sub("<f>", text) == eager.sub("<f>", text)
    assert lazy.subn("<f>", text) == eager.subn("<f>", text)
    assert lazy.split(text) == eager.split(text)
    assert lazy.fullmatch("x.py:9") is not None
    assert lazy.compiled is eager  # re's own cache: one compiled pattern
    # compiled once: the methods are the object's own now, no lookup through __getattr__
    assert "match" in vars(lazy) and vars(lazy)["match"] == eager.match


def test_a_lazy_pattern_has_only_the_patterns_methods() -> None:
    lazy = LazyPattern("x")
    try:
        lazy.no_such_method  # noqa: B018
    except AttributeError:
        pass
    else:
        raise AssertionError("an unknown attribute must raise AttributeError")
    assert "match" not in vars(lazy)  # asking for it compiled nothing
