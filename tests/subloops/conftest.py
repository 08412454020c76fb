"""Fixtures: a scratch copy of the feature sample, as a real git repository."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from tests.support.git_repos import git_repo

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "feature_shapes"


@pytest.fixture
def shapes(tmp_path: Path) -> Path:
    work = tmp_path / "shapes"
    shutil.copytree(SAMPLE, work, ignore=shutil.ignore_patterns(".looprun", "__pycache__"))
    return git_repo(work)
