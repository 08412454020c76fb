"""A real tool a test needs: skipped where it is not installed, except in CI, which
installs every tool (.ci/run), so there its absence is a failure, never a silent skip."""

from __future__ import annotations

import os
import shutil
from typing import NoReturn

import pytest


def missing(what: str, install: str) -> NoReturn:
    """Fail in CI, skip elsewhere: ``what`` is not installed (``install`` says how)."""
    if os.environ.get("CI"):
        pytest.fail(f"{what} is not installed: CI must run these tests ({install})")
    pytest.skip(f"{what} is not installed ({install})")


def require(program: str, install: str, path: str | None = None) -> str:
    """The program's path on PATH (or on ``path``); see :func:`missing` when it is not."""
    found = shutil.which(program, path=path) if path else shutil.which(program)
    if found is None:
        missing(program, install)
    return found
