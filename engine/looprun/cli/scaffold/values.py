"""The values a scaffold starts from: the built-in parent's, read from the composed
template so they never drift from it, and written as one-line YAML."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from looprun.errors import UsageError
from looprun.system.resources import builtin_template
from looprun.template.compose import compose

BASES = ("bugfix", "feature", "refactor", "test_backfill")
DEFAULT_BASE = "bugfix"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
SUFFIXES = (".yaml", ".yml")


def flow(value: Any) -> str:
    """A value as one line of YAML (JSON flow style is valid YAML; plain keys read better)."""
    if isinstance(value, Mapping) and all(isinstance(k, str) and NAME.match(k) for k in value):
        return "{" + ", ".join(f"{k}: {flow(v)}" for k, v in value.items()) + "}"
    return json.dumps(value, ensure_ascii=False)


def block_list(items: list[Any], indent: str = "  ") -> str:
    return "\n".join(f"{indent}- {flow(item)}" for item in items)


def parent_of(base: str) -> dict[str, Any]:
    """The built-in ``base`` after composition, as plain data."""
    path = builtin_template(base)
    if path is None:  # pragma: no cover - BASES are shipped with the package
        raise UsageError(f"built-in template {base!r} is missing from this installation")
    data = compose(path).data
    return data if isinstance(data, dict) else {}


def value_at(data: Mapping[str, Any], dotted: str) -> Any:
    value: Any = data
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, Mapping) else None
    return value
