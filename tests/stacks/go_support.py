"""Shared by the Go stack's tests: the real toolchain (a skip locally, a failure in CI) and
a small module written to a directory, its tests run the way the Go pack runs them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.support.tools import require

from looprun.observe.base import Observation, ParseInput
from looprun.observe.gotest import GoTestParser

# what the adapter sets too: nothing reaches the network, the toolchain is the local one
GO_ENV = {"GOFLAGS": "-mod=readonly", "GOPROXY": "off", "GOTOOLCHAIN": "local"}


def require_go() -> str:
    """The go program; the test is skipped without it, except in CI where it must exist."""
    return require("go", "apt-get install golang-go")


def go_test(root: Path, *packages: str) -> tuple[Path, str, int]:
    """``go test -count=1 -json`` as the pack runs it: the stream to a file, go's stderr
    captured; (stream file, stderr, exit code)."""
    go = require_go()
    stream = root.parent / f"{root.name}-go-test.json"
    with stream.open("wb") as out:
        done = subprocess.run(
            [go, "test", "-count=1", "-json", *(packages or ("./...",))],
            cwd=root,
            stdout=out,
            stderr=subprocess.PIPE,
            env={**os.environ, **GO_ENV},
            check=False,
            timeout=300,
        )
    return stream, done.stderr.decode("utf-8", "replace"), done.returncode


def parse(root: Path, stream: Path, stderr: str, exit_code: int | None) -> Observation:
    return GoTestParser().parse(
        ParseInput(workdir=root, file=stream, output=stderr, exit_code=exit_code)
    )


def run_and_parse(root: Path) -> Observation:
    return parse(root, *go_test(root))
