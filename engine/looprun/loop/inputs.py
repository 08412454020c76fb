"""Template inputs from the command line: ``--intent`` and ``--set key=value``, type-checked.

Inputs of type ``command`` are trusted shell code written by the invoker, so they are
wrapped in ``ShellCode`` and substituted into observer commands unquoted; every other
value stays data and is shell-quoted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from looprun.errors import UsageError
from looprun.template.expressions import ShellCode
from looprun.template.model import InputSpec

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def _convert(spec: InputSpec, raw: Any) -> Any:
    name, kind = spec.name, spec.type
    if kind == "command":
        return ShellCode(str(raw))
    if not isinstance(raw, str):
        return list(raw) if kind == "list" and isinstance(raw, tuple) else raw
    try:
        if kind == "integer":
            return int(raw)
        if kind == "number":
            return float(raw)
    except ValueError:
        article = "an" if kind[0] in "aeiou" else "a"
        raise UsageError(f"--set {name}={raw!r}: expected {article} {kind}") from None
    if kind == "boolean":
        low = raw.strip().lower()
        if low in _TRUE | _FALSE:
            return low in _TRUE
        raise UsageError(f"--set {name}={raw!r}: expected true or false")
    if kind == "list":
        text = raw.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                raise UsageError(f"--set {name}: not a JSON list: {exc}") from None
            if not isinstance(value, list):
                raise UsageError(f"--set {name}: expected a list")
            return value
        return [part.strip() for part in text.split(",") if part.strip()]
    return raw


def parse_sets(sets: Iterable[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set {item!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


def build_inputs(
    specs: Mapping[str, InputSpec], intent: str | None, sets: Mapping[str, str]
) -> dict[str, Any]:
    """Every declared input after defaults, ``--intent`` and ``--set``; errors name the input."""
    unknown = sorted(k for k in sets if k not in specs and k != "intent")
    if unknown:
        declared = ", ".join(sorted(specs)) or "none"
        raise UsageError(
            f"unknown input(s) {', '.join(unknown)}; this template declares: {declared}"
        )
    raw: dict[str, Any] = {}
    for name, spec in specs.items():
        if spec.default is not None:
            raw[name] = spec.default
    raw.update(sets)
    if intent is not None:
        raw["intent"] = intent
    out: dict[str, Any] = {}
    for name, value in raw.items():
        spec = specs.get(name) or InputSpec(name)
        out[name] = _convert(spec, value)
    missing = sorted(n for n, s in specs.items() if s.required and out.get(n) in (None, ""))
    if missing:
        hint = " (use --intent)" if missing == ["intent"] else " (use --set NAME=VALUE)"
        raise UsageError(f"missing required input(s): {', '.join(missing)}{hint}")
    out.setdefault("intent", "")
    return out
