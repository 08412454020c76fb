"""Numbers that name an input: ``max_diff_lines: "{{ inputs.max_diff_lines }}"``.

A team sets a limit once, as an input's default (or with ``--set``), and every place that
needs it reads it. The reference is resolved when the template loads: the input must
exist, have a number type and a value, and that value must fit where it is used (the
schema's bounds), or the template is invalid with the reference's file:line.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from looprun.template.schema_check import value_problem
from looprun.template.suggest import did_you_mean
from looprun.template.yamlpos import JsonPath

INPUT_REF = re.compile(r"^\s*\{\{\s*inputs\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}\s*$")

# Where a number may name an input, and what kind of number it is.
NUMBER_FIELDS: tuple[tuple[JsonPath, str], ...] = (
    (("act", "max_steps"), "integer"),
    (("act", "constraints", "max_diff_lines"), "integer"),
    (("act", "constraints", "max_output_bytes"), "integer"),
    (("act", "constraints", "command_timeout"), "duration"),
    (("limits", "max_iterations"), "integer"),
    (("limits", "max_tokens"), "integer"),
    (("limits", "max_cost_usd"), "number"),
    (("limits", "max_repeats"), "integer"),
    (("limits", "timeout"), "duration"),
    (("context", "budget_tokens"), "integer"),
    (("context", "recent_rounds"), "integer"),
)
_INPUT_TYPES = {
    "integer": ("integer",),
    "number": ("integer", "number"),
    "duration": ("integer", "number", "string"),
}


def _fields(data: Mapping[str, Any]) -> list[tuple[JsonPath, str]]:
    per_tool = (
        data.get("limits", {}).get("per_tool") if isinstance(data.get("limits"), dict) else None
    )
    tools = (
        [(("limits", "per_tool", t), "integer") for t in per_tool or {}]
        if isinstance(per_tool, dict)
        else []
    )
    return [*NUMBER_FIELDS, *tools]


def _get(data: Any, path: JsonPath) -> Any:
    for part in path:
        if not isinstance(data, dict) or part not in data:
            return None
        data = data[part]
    return data


def _set(data: dict[str, Any], path: JsonPath, value: Any) -> None:
    for part in path[:-1]:
        data = data[part]
    data[path[-1]] = value


def resolve(
    data: dict[str, Any], given: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any], dict[JsonPath, str], list[tuple[JsonPath, str]]]:
    """``data`` with every input reference replaced by the input's value (``given`` first,
    then its default); the references found; and (path, message) for each bad one."""
    inputs = data.get("inputs") if isinstance(data.get("inputs"), dict) else {}
    out = data
    refs: dict[JsonPath, str] = {}
    problems: list[tuple[JsonPath, str]] = []
    for path, kind in _fields(data):
        raw = _get(data, path)
        match = INPUT_REF.match(raw) if isinstance(raw, str) else None
        if match is None:
            continue
        name = match[1]
        refs[path] = name
        spec = inputs.get(name)
        if not isinstance(spec, dict):
            problems.append((path, f"no input named '{name}'{did_you_mean(name, inputs)}"))
            continue
        declared = spec.get("type", "string")
        if declared not in _INPUT_TYPES[kind]:
            wanted = " or ".join(_INPUT_TYPES[kind])
            problems.append(
                (path, f"input '{name}' is of type {declared}; this value needs {wanted}")
            )
            continue
        source = "--set"
        if given is not None and name in given:
            value = given[name]
        elif "default" in spec and spec["default"] is not None:
            value, source = spec["default"], "its default"
        else:
            problems.append(
                (path, f"input '{name}' has no default; give it one so this value is known")
            )
            continue
        wrong = value_problem(path, value)
        if wrong:
            problems.append((path, f"input '{name}' ({source} {value!r}): {wrong}"))
            continue
        if out is data:
            out = copy.deepcopy(data)
        _set(out, path, value)
    return out, refs, problems
