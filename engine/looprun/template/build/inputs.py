"""``inputs``: each input's type, default and whether it is required."""

from __future__ import annotations

from looprun.data.freeze import freeze
from looprun.template.build.reader import Reader
from looprun.template.model import InputSpec
from looprun.template.semantic import INPUT_CHECKS
from looprun.template.yamlpos import JsonPath


def build_inputs(r: Reader) -> dict[str, InputSpec]:
    out: dict[str, InputSpec] = {}
    for name, spec in (r.get(("inputs",), dict) or {}).items():
        if not isinstance(spec, dict):
            continue
        path: JsonPath = ("inputs", name)
        kind = spec.get("type", "string")
        if kind not in INPUT_CHECKS:
            continue
        default = spec.get("default")
        required = spec.get("required") is True
        if "default" in spec and default is not None and not INPUT_CHECKS[kind](default):
            r.problem((*path, "default"), f"default {default!r} is not of type {kind}")
        if required and default is not None:
            r.problem((*path, "required"), "a required input cannot have a default")
        out[name] = InputSpec(
            name=name,
            type=kind,
            required=required,
            default=freeze(default),
            description=str(spec.get("description", "")),
            location=r.doc.key_at(path),
        )
    return out
