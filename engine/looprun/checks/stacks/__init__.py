"""The stacks looprun knows, one adapter module each (``STACK``), by name.

Adding a stack means adding its adapter here and its pack in ``templates/observers/``;
nothing else branches on a stack.
"""

from __future__ import annotations

import importlib
import shutil
from functools import cache

from looprun.checks.stacks.base import Stack, Tool
from looprun.system.proc import scrubbed_env

__all__ = ["Stack", "Tool", "get", "missing_tools", "names"]

# detection order matters only for messages: a repository with two stacks is refused
_MODULES = ("python", "go", "node", "rust", "java")


def names() -> tuple[str, ...]:
    return _MODULES


@cache
def get(name: str) -> Stack:
    """The adapter of stack ``name``; KeyError for an unknown one."""
    if name not in _MODULES:
        raise KeyError(name)
    stack: Stack = importlib.import_module(f"looprun.checks.stacks.{name}").STACK
    return stack


def missing_tools(stack: Stack) -> list[str]:
    """``program was not found on PATH: install hint`` for each tool of ``stack`` that
    is not on the PATH its checks run with."""
    path = scrubbed_env().get("PATH")
    return [
        f"{tool.program} was not found on PATH: {tool.install}"
        for tool in stack.tools
        if shutil.which(tool.program, path=path) is None
    ]
