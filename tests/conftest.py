"""Session-wide environment for the suite.

Templates are remembered (`looprun validate`'s and runs' valid-cache) in a directory of the
suite's own, never the user's. The engine's bytecode is compiled once, as it is for an
installed package: where the machine forbids writing bytecode, every `looprun` process the
suite starts would otherwise compile the engine again. Nothing else is cached: a test that
edits a module and runs it again within the same second, at the same size, must not
import a stale compiled copy.
The pytest runs that tests start as checks load none of the plugins this virtualenv
installs for the suite itself (hypothesis, xdist, anyio): pytest would autoload them, and
importing them costs each of those runs much of its start-up; no project under test uses
them (a test that needs one names it with `-p`). Runs started by tests, in this process or
as subprocesses, inherit all three. A suite started as a background job of a shell without
job control ignores SIGINT, and so would every process it starts: Ctrl-C is given back its
usual meaning, so the tests that send it test the run, not how the suite was started.
Maven's JVM compiles with its quick compiler only and the serial collector, unless the
environment already says how: the suite's Maven runs are short, where the optimising
compiler costs more than it saves.

tests/on_ray is a tier of its own (it starts a Ray cluster and needs the `ray` extra): it
is collected only when named, `pytest tests/on_ray`."""

from __future__ import annotations

import compileall
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

import looprun

_RAY_TIER = Path(__file__).parent / "on_ray"
# the suite's own pytest plugins, by entry-point name, kept out of the pytest runs it starts
SUITE_ONLY_PLUGINS = "-p no:hypothesispytest -p no:xdist -p no:xdist.looponfail -p no:anyio"
SHORT_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path != _RAY_TIER:
        return None
    named = (Path(arg.split("::")[0]).resolve() for arg in config.args)
    return not any(p == _RAY_TIER or _RAY_TIER in p.parents for p in named) or None


@pytest.fixture(scope="session", autouse=True)
def _suite_environment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    compileall.compile_dir(Path(looprun.__file__).parent, quiet=2)  # read-only: no matter
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LOOPRUN_CACHE_DIR", str(tmp_path_factory.mktemp("looprun-cache")))
        addopts = os.environ.get("PYTEST_ADDOPTS", "")
        mp.setenv("PYTEST_ADDOPTS", f"{addopts} {SUITE_ONLY_PLUGINS}".strip())
        if not os.environ.get("MAVEN_OPTS"):
            mp.setenv("MAVEN_OPTS", SHORT_JVM)
        yield
