"""Go: ``go test -json`` (the ``go_test`` parser) and ``go vet``.

What decides how ``go test`` builds is pinned to the run's base: the module files
(go.mod's ``replace`` and ``go``/``toolchain`` lines, go.sum) and the workspace files
(a go.work the model adds is not in the check's tree at all, so it cannot swap in a module
of its own). vendor/ is not untrusted: when it is tracked it is the source go builds the
dependencies from (go checks vendor/modules.txt against the pinned go.mod), and a change
to it is a change to code like any other, shown in the diff.

Nothing reaches the network: no module proxy (modules must already be in the user's module
cache, GOMODCACHE, which the sandbox keeps read-only) and no toolchain download. ``-mod``
is left to go: its default is ``readonly`` (``vendor`` when a consistent vendor/ is
tracked), and forcing ``-mod=readonly`` would turn a vendored repository offline-broken.
The build cache is the run's own (GOCACHE), so a cached test result is never reused
across runs (``-count=1`` in the pack disables the test cache anyway); it starts as a copy
of the seed the repository's last baseline saved (checks/seeded_cache.py), so a run does
not compile the standard library's test dependencies cold.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from types import MappingProxyType

from looprun.checks.stacks.base import Stack, Tool

# a top-level test function: `func TestName(t *testing.T)` (go test runs no other)
_TEST_FUNC = re.compile(r"^func\s+(Test[A-Z_0-9]\w*|Test)\s*\(\s*\w+\s+\*testing\.T\s*\)", re.M)
_NAME = re.compile(r"^Test\w*$")


def test_ids(path: str, text: str) -> tuple[str, ...]:
    """The ids (``DIR/TestName``, the go_test parser's) of the tests in the file ``path``
    holding ``text``: what a selection of just that file's tests names."""
    directory = posixpath.dirname(path)
    names = dict.fromkeys(m[1] for m in _TEST_FUNC.finditer(text))
    return tuple(f"{directory}/{n}" if directory else n for n in names)


def select(ids: Sequence[str]) -> tuple[str, ...]:
    """``go test`` arguments running exactly ``ids``: their packages' directories and one
    anchored ``-run`` pattern of their names (no regex character can be in a name)."""
    dirs: dict[str, None] = {}
    names: dict[str, None] = {}
    for test_id in ids:
        directory, _, name = test_id.rpartition("/")
        if not _NAME.match(name):
            raise ValueError(f"not a go test id: {test_id!r}")
        dirs["./" + directory if directory else "."] = None
        names[name] = None
    if not names:
        raise ValueError("no test to select")
    return (*dirs, "-run", f"^({'|'.join(names)})$")


STACK = Stack(
    name="go",
    markers=("go.mod", "go.work"),
    sources=(".go",),
    tools=(Tool("go", "install Go (apt-get install golang-go)"),),
    # the pack's check_config, the same globs
    pinned=("**/go.mod", "**/go.sum", "**/go.work", "**/go.work.sum"),
    # a compiled test binary (`go test -c`, `-o`) or a profile is output, never input
    untrusted=("*.test", "*.prof", "*.coverprofile"),
    caches=MappingProxyType({"GOCACHE": "go-build"}),
    seeded=("GOCACHE",),
    env=MappingProxyType(
        {
            "GOPROXY": "off",  # no module download: the module cache must hold them
            "GOTOOLCHAIN": "local",  # go.mod's toolchain line never fetches another go
            "GOTELEMETRY": "off",  # nothing written to the user's config directory
        }
    ),
    select=select,
    tests_in=test_ids,
)
