"""Each template test remembers valid files in its own cache directory, never the user's."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _own_validate_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Each test remembers valid templates in its own directory, never the user's."""
    where = tmp_path_factory.mktemp("valid-cache")
    monkeypatch.setenv("LOOPRUN_CACHE_DIR", str(where))
    return where
