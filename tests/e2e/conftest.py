"""Fixtures shared by the end-to-end modules."""

from __future__ import annotations

from pathlib import Path

import pytest
from real_package import fetch_sdist


@pytest.fixture(scope="session")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real package's unpacked source distribution, downloaded once per session."""
    return fetch_sdist(tmp_path_factory.mktemp("sdist"))
