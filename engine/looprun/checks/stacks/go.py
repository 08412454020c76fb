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

from types import MappingProxyType

from looprun.checks.stacks.base import Stack, Tool

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
)
