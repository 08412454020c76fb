"""Release hygiene for users who pin: every `rev:` and `@vX.Y.Z` the docs show is the
tag of the package's own version, and `pip install git+URL@TAG` installs that version."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
TAG = f"v{VERSION}"


def test_pinned_revisions_in_the_docs_are_the_version_tag() -> None:
    from looprun import __version__

    assert __version__ == VERSION
    pins: list[tuple[str, str]] = []
    for path in [ROOT / "README.md", ROOT / ".pre-commit-hooks.yaml", *ROOT.glob("docs/*.md")]:
        text = path.read_text()
        pins += [(path.name, m) for m in re.findall(r"\brev: (\S+)", text)]
        pins += [(path.name, m) for m in re.findall(r"looprun@(v[\w.]+)", text)]
    assert ("README.md", TAG) in pins and (".pre-commit-hooks.yaml", TAG) in pins
    assert all(tag == TAG for _, tag in pins), pins


@pytest.mark.e2e
def test_pip_install_from_a_git_url_at_the_tag(tmp_path: Path) -> None:
    """The README's `pip install "git+URL@TAG"`, with a local clone standing in for the
    hosted repository (the tag made there, as a release makes it)."""
    clone = tmp_path / "looprun"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "tag", "-f", TAG],
        cwd=clone, check=True,
    )  # fmt: skip
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", f"git+file://{clone}@{TAG}"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert pip.returncode == 0, pip.stderr
    out = subprocess.run(
        [str(venv / "bin" / "looprun"), "--version"], capture_output=True, text=True
    )
    assert out.returncode == 0 and VERSION in out.stdout
