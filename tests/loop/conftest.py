"""Fixtures for the loop tests; the helpers live in ``loop_helpers``."""

from __future__ import annotations

from pathlib import Path

import pytest
from loop_helpers import Rig, new_rig


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return new_rig(tmp_path)
