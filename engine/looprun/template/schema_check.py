"""JSON Schema validation with every error located and phrased for a person.

``jsonschema`` is slow to import, so it is imported here, on the first document that
``schema_fast`` does not find valid (whose errors jsonschema then phrases).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from functools import cache
from typing import Any

from looprun.errors import Problem
from looprun.system.resources import schema_path
from looprun.template.schema_fast import Check, compile_validity
from looprun.template.suggest import did_you_mean
from looprun.template.yamlpos import Document, JsonPath

_SHALLOW_MISMATCH = ("type", "enum", "const")


@cache
def template_schema() -> dict[str, Any]:
    """The published schema: what a file may say before composition (fragments, `key: null`
    removals, observers a parent completes, refine edits)."""
    return json.loads(schema_path("template").read_text("utf-8"))


def composed_schema(node: Any) -> Any:
    """The schema a composed document must meet, derived from the published one: removals
    are gone (``x-removable``), what only a parent could supply is required
    (``x-required-after-composition``), and raw-file-only rules are dropped."""
    if isinstance(node, list):
        return [
            composed_schema(n) for n in node if not (isinstance(n, dict) and n.get("x-raw-only"))
        ]
    if not isinstance(node, dict):
        return node
    if node.get("x-removable"):
        kept = next(b for b in node["anyOf"] if b != {"type": "null"})
        return composed_schema({**kept, **{k: v for k, v in node.items() if k == "description"}})
    out = {k: composed_schema(v) for k, v in node.items()}
    extra = out.pop("x-required-after-composition", None)
    if extra:
        out["required"] = [*out.get("required", []), *extra]
    if out.get("allOf") == []:
        del out["allOf"]
    return out


_INPUT_REF = {"$ref": "#/$defs/input_ref"}


def _deref(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = defs[node["$ref"].rsplit("/", 1)[1]]
    if "anyOf" in node and _INPUT_REF in node["anyOf"]:
        node = {**node, "anyOf": [b for b in node["anyOf"] if b != _INPUT_REF]}
    return node


def value_problem(path: JsonPath, value: Any) -> str | None:
    """Why ``value`` does not fit at ``path`` of a composed template (a literal there, not
    an input reference), in words; None if it fits."""
    from jsonschema import Draft202012Validator

    root = composed_schema(template_schema())
    defs = root["$defs"]
    node: dict[str, Any] = root
    for part in path:
        node = _deref(node, defs)
        props = node.get("properties", {})
        node = props[part] if part in props else node.get("additionalProperties", {})
    node = _deref(node, defs)
    schema = {**node, "$defs": defs}
    if next(Draft202012Validator(schema).iter_errors(value), None) is None:
        return None
    return f"expected {expected(node)}, got {show(value)}"


@cache
def _fast_validity() -> Check | None:
    return compile_validity(composed_schema(template_schema()))


@cache
def _validator() -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(composed_schema(template_schema()))


def dotted(path: Iterable[str | int]) -> str:
    """``('refine', 2, 'then')`` -> ``refine[2].then``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def show(value: Any) -> str:
    """A value as the person wrote it, briefly."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return repr(text)
    return str(value)


_TYPE_WORDS = {
    "string": "text",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "object": "a mapping",
    "array": "a list",
    "null": "null",
}


def expected(schema: dict[str, Any]) -> str:
    """What a schema accepts, in words (``an integer ≥ 1``)."""
    if "x-expect" in schema:
        return str(schema["x-expect"])
    if "enum" in schema:
        return "one of " + ", ".join(show(v) if v is not None else "null" for v in schema["enum"])
    if "const" in schema:
        return show(schema["const"])
    types = schema.get("type")
    if isinstance(types, list):
        return " or ".join(_TYPE_WORDS.get(t, t) for t in types)
    word = _TYPE_WORDS.get(types or "", "a valid value")
    bounds = []
    if "minimum" in schema and "maximum" in schema:
        return f"{word} from {schema['minimum']} to {schema['maximum']}"
    if "minimum" in schema:
        bounds.append(f"≥ {schema['minimum']}")
    if "exclusiveMinimum" in schema:
        bounds.append(f"> {schema['exclusiveMinimum']}")
    if "maximum" in schema:
        bounds.append(f"≤ {schema['maximum']}")
    if types == "string" and schema.get("minLength"):
        word = "non-empty text"
    if types == "array" and schema.get("minItems"):
        word = "a non-empty list"
    return " ".join([word, *bounds]) if bounds else word


def _branches(schema: dict[str, Any]) -> list[Any]:
    return list(schema.get("anyOf", ())) + list(schema.get("oneOf", ()))


def _shallow_mismatch(error: Any) -> bool:
    if error.relative_path:
        return False
    if error.validator in _SHALLOW_MISMATCH:
        return True
    if error.validator in ("anyOf", "oneOf"):
        return not _fitting_branches(error)
    return False


def _fitting_branches(error: Any) -> list[list[Any]]:
    branches: dict[Any, list[Any]] = {}
    for sub in error.context or ():
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)
    return [errs for errs in branches.values() if not any(_shallow_mismatch(e) for e in errs)]


def _enum_choices(error: Any) -> list[str]:
    out: list[str] = []
    for sub in error.context or ():
        if sub.validator == "enum" and not sub.relative_path:
            out += [str(v) for v in sub.validator_value if isinstance(v, str)]
        out += _enum_choices(sub)
    return out


def _explain(error: Any, doc: Document) -> Iterator[Problem]:
    path: JsonPath = tuple(error.absolute_path)
    where = dotted(path)
    prefix = f"{where}: " if where else ""
    value = error.instance
    kind = error.validator
    if kind in ("anyOf", "oneOf"):
        fitting = _fitting_branches(error)
        if fitting and "x-expect" in error.schema and all(not e.relative_path for e in fitting[0]):
            fitting = []  # e.g. a duration string of the wrong shape: say what a duration is
        if fitting:
            for sub in fitting[0]:
                yield from _explain(sub, doc)
            return
        hint = did_you_mean(value, _enum_choices(error)) if isinstance(value, str) else ""
        if isinstance(value, str) and "{{" in value and _INPUT_REF in _branches(error.schema):
            hint = " (a value may also be exactly one input: `{{ inputs.NAME }}`)"
        yield Problem(
            doc.value_at(path),
            f"{prefix}expected {expected(error.schema)}, got {show(value)}{hint}",
        )
        return
    if kind == "additionalProperties" and isinstance(value, dict):
        known = list(error.schema.get("properties", {}))
        extra = [k for k in value if k not in known]
        if not known:  # additionalProperties is a schema for the values, not false
            return
        for key in extra:
            hint = did_you_mean(key, known) or f" (expected one of: {', '.join(known)})"
            inside = f" in {where}" if where else ""
            yield Problem(doc.key_at((*path, key)), f"unknown key '{key}'{inside}{hint}")
        return
    if kind == "required":
        missing = [k for k in error.validator_value if isinstance(value, dict) and k not in value]
        for key in missing:
            yield Problem(doc.value_at(path), f"{prefix}missing required key '{key}'")
        return
    if kind == "uniqueItems":
        yield Problem(doc.value_at(path), f"{prefix}lists the same entry twice")
        return
    if kind in ("minItems", "minProperties") and not value:
        yield Problem(doc.value_at(path), f"{prefix}must not be empty")
        return
    if kind == "enum" and isinstance(value, str):
        hint = did_you_mean(value, [str(v) for v in error.validator_value if v is not None])
        yield Problem(
            doc.value_at(path),
            f"{prefix}expected {expected(error.schema)}, got {show(value)}{hint}",
        )
        return
    if (
        kind == "type"
        and isinstance(value, str)
        and error.schema.get("type") in ("integer", "number")
    ):
        yield Problem(
            doc.value_at(path), f"{prefix}expected {expected(error.schema)}, got {show(value)}"
        )
        return
    yield Problem(
        doc.value_at(path), f"{prefix}expected {expected(error.schema)}, got {show(value)}"
    )


def schema_problems(doc: Document) -> list[Problem]:
    """Every schema violation in a composed document, located and phrased for people."""
    fast = _fast_validity()
    if fast is not None and fast(doc.data):  # jsonschema would find nothing
        return []
    problems: list[Problem] = []
    errors = sorted(
        _validator().iter_errors(doc.data), key=lambda e: [str(p) for p in e.absolute_path]
    )
    for error in errors:
        if "propertyNames" in error.absolute_schema_path:
            problems.extend(_explain_name(error, doc))
            continue
        problems.extend(_explain(error, doc))
    return problems


def _explain_name(error: Any, doc: Document) -> Iterator[Problem]:
    """A bad key: jsonschema reports it with the key as instance and the mapping's path."""
    path: JsonPath = tuple(error.absolute_path)
    where = dotted(path)
    name = error.instance
    yield Problem(
        doc.key_at((*path, name)) if isinstance(name, str) else doc.value_at(path),
        f"{where + ': ' if where else ''}'{name}' is not a valid name "
        "(use letters, digits and '_'; "
        "do not start with a digit)",
    )
