"""Read-only plain data: the facts observers produce and templates read.

Kept apart from the expression engine so that reading a report (``looprun observe``)
does not load jinja2.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

_SCALARS = frozenset({str, int, float, bool, type(None)})


def freeze(value: Any) -> Any:
    """Deep-freeze plain data: dicts become read-only mappings, lists become tuples."""
    if type(value) in _SCALARS:
        return value
    if isinstance(value, Mapping):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):  # a long list of ids: scalars kept without a call
        return tuple([v if type(v) in _SCALARS else freeze(v) for v in value])
    return value


def thaw(value: Any) -> Any:
    """The inverse of freeze: plain dicts and lists, for JSON output and expression contexts."""
    if type(value) in _SCALARS:
        return value
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [v if type(v) in _SCALARS else thaw(v) for v in value]
    return value
