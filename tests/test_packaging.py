"""The wheel must carry the schemas and built-in templates, so an installed looprun
finds built-in templates by name."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_wheel_ships_schemas_and_templates(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = tmp_path.glob("looprun-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for schema in ROOT.glob("schemas/*.json"):
        assert f"looprun/schemas/{schema.name}" in names
    for template in ROOT.glob("templates/**/*.yaml"):
        rel = template.relative_to(ROOT).as_posix()
        assert f"looprun/{rel}" in names
    assert "looprun/cli/main.py" in names
    assert any(n.endswith("entry_points.txt") for n in names)
