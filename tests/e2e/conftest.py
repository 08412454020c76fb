"""Fixtures shared by the end-to-end modules."""

from __future__ import annotations

from pathlib import Path

import pytest
from real_package import fetch_sdist


@pytest.fixture(scope="session")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real package's unpacked source distribution, downloaded once per session."""
    return fetch_sdist(tmp_path_factory.mktemp("sdist"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The runs on a real package (a PyPI sdist with a bug planted, dozens of full
    bugfix runs) are end-to-end: their tier is `pytest -m e2e`, beside the toolchains'.
    So is every test that asks for the package, wherever it is."""
    for item in items:
        named = item.path.name.startswith("test_real_package_")
        if named or "sdist" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.e2e)
