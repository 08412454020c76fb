"""``--executor ray`` without Ray installed is a usage error, even where a directory named
``ray`` (a repository's own folder) would import as an empty namespace package."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
from tests.support.cli import looprun

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(
    getattr(importlib.util.find_spec("ray"), "origin", None) is not None,
    reason="Ray is installed here: the refusal is for machines without it",
)
def test_a_directory_named_ray_is_not_taken_for_ray(tmp_path: Path) -> None:
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "notes.txt").write_text("a repository's own folder\n")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\nversion = '0'\n")
    template = tmp_path / "bugfix.yaml"
    shutil.copy(ROOT / "templates" / "bugfix.yaml", template)
    script = tmp_path / "model.yaml"
    script.write_text("[]\n")
    done = looprun(
        str(template),
        "--intent",
        "fix it",
        "--model",
        f"script:{script}",
        "--executor",
        "ray",
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert "--executor ray needs Ray: pip install 'looprun[ray]'" in done.stderr
    assert "Traceback" not in done.stderr
