from __future__ import annotations

from pathlib import Path

import pytest
from tests.report.runs import real_run


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """One real two-iteration run shared by a module's tests (they only read it)."""
    return real_run(tmp_path_factory.mktemp("run"))
