"""The stacks looprun knows, one adapter module each (``STACK``), by name.

Adding a stack means adding its adapter here and its pack in ``templates/observers/``;
nothing else branches on a stack.
"""

from __future__ import annotations

import importlib
from functools import cache

from looprun.checks.stacks.base import Stack, Tool

__all__ = ["Stack", "Tool", "get", "names"]

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
