"""Python: pytest, ruff, coverage.py."""

from __future__ import annotations

from looprun.checks.stacks.base import Stack, Tool
from looprun.checks.stacks.python_params import varying

STACK = Stack(
    name="python",
    markers=("pyproject.toml", "setup.cfg", "setup.py"),
    sources=(".py",),
    tools=(Tool("python", "install Python 3 and pytest (pip install pytest)"),),
    pinned=(
        "pytest.toml",
        ".pytest.toml",
        "pytest.ini",
        ".pytest.ini",
        "pyproject.toml",
        "tox.ini",
        "setup.cfg",
        "**/sitecustomize.py",
        "**/usercustomize.py",
        "**/*.pth",
    ),
    untrusted=("__pycache__/", "*.pyc", "*.pyo", "*.egg-info/", "*.dist-info/", ".pytest_cache/"),
    varying=varying,
    # pytest names every case at collection: looprun's outcome plugin, loaded in the
    # command, sends each collected test's JUnit name over its channel
    listing=("--collect-only",),
)
