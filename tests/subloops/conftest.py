"""Fixtures: a scratch copy of the feature sample, as a real git repository."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from subloop_helpers import SAMPLE, git_repo


@pytest.fixture
def shapes(tmp_path: Path) -> Path:
    work = tmp_path / "shapes"
    shutil.copytree(SAMPLE, work, ignore=shutil.ignore_patterns(".looprun", "__pycache__"))
    return git_repo(work)
