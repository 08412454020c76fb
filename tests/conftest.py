"""The whole suite remembers templates (`looprun validate`'s and runs' valid-cache) in a
directory of its own, never the user's: runs started by tests, in this process or as
subprocesses, inherit it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session", autouse=True)
def _suite_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LOOPRUN_CACHE_DIR", str(tmp_path_factory.mktemp("looprun-cache")))
        yield
