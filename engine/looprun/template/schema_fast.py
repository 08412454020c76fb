"""Is a document valid under a JSON Schema, answered without jsonschema.

Validating a template is mostly saying "valid": jsonschema answers that through its
reference resolution and error objects, and costs more to import than the rest of
validation. This module compiles a schema into plain predicates, once, for the keywords
(draft 2020-12 semantics, as jsonschema implements them) the published template schema
uses. It only ever answers "valid"; whatever it does not find valid goes to jsonschema,
whose errors are the ones reported, so a document's problems are jsonschema's own. A
schema using any other keyword, or a reference other than ``#/$defs/...``, compiles to
None (no fast answer at all).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Check = Callable[[Any], bool]

# keywords that assert nothing (annotations, and the definitions $ref points into)
_IGNORED = frozenset({"$schema", "$id", "$defs", "$comment", "title", "description", "default"})


class _Unsupported(Exception):
    """The schema uses something this compiler does not implement."""


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_TYPES: dict[str, Check] = {
    "array": lambda v: isinstance(v, list),
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: (
        (isinstance(v, int) and not isinstance(v, bool))
        or (isinstance(v, float) and v.is_integer())
    ),
    "null": lambda v: v is None,
    "number": _is_number,
    "object": lambda v: isinstance(v, dict),
    "string": lambda v: isinstance(v, str),
}

_TRUE, _FALSE = object(), object()


def _unbool(value: Any) -> Any:
    return _TRUE if value is True else _FALSE if value is False else value


def equal(one: Any, two: Any) -> bool:
    """Equality as JSON Schema means it: ``true`` is not ``1``, through nesting."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, Sequence) and isinstance(two, Sequence):
        return len(one) == len(two) and all(equal(a, b) for a, b in zip(one, two, strict=True))
    if isinstance(one, Mapping) and isinstance(two, Mapping):
        return len(one) == len(two) and all(k in two and equal(v, two[k]) for k, v in one.items())
    return bool(_unbool(one) == _unbool(two))


def _unique(items: list[Any]) -> bool:
    seen: list[Any] = []
    for item in items:
        if any(equal(item, s) for s in seen):
            return False
        seen.append(item)
    return True


class _Compiler:
    def __init__(self, root: Mapping[str, Any]):
        self.root = root
        self.refs: dict[str, Check] = {}

    def ref(self, ref: str) -> Check:
        """A ``#/$defs/name`` reference, compiled once (references may be recursive)."""
        if ref in self.refs:
            return self.refs[ref]
        prefix = "#/$defs/"
        defs = self.root.get("$defs")
        name = ref[len(prefix) :]
        if not ref.startswith(prefix) or not isinstance(defs, dict) or name not in defs:
            raise _Unsupported(ref)
        cell: list[Check] = []
        self.refs[ref] = lambda value: cell[0](value)
        cell.append(self.schema(defs[name]))
        self.refs[ref] = cell[0]
        return cell[0]

    def schema(self, node: Any) -> Check:
        if node is True:
            return lambda _value: True
        if node is False:
            return lambda _value: False
        if not isinstance(node, dict):
            raise _Unsupported(repr(node))
        checks = [
            self.keyword(key, value, node)
            for key, value in node.items()
            if key not in _IGNORED and not key.startswith("x-") and key not in ("then", "else")
        ]
        if not checks:
            return lambda _value: True
        if len(checks) == 1:
            return checks[0]
        return lambda value: all(check(value) for check in checks)

    def keyword(self, key: str, value: Any, node: Mapping[str, Any]) -> Check:
        """One keyword's assertion, as jsonschema's implementation of it decides."""
        if key == "type":
            names = value if isinstance(value, list) else [value]
            tests = [_TYPES[n] for n in names]
            return lambda v: any(t(v) for t in tests)
        if key == "$ref":
            return self.ref(value)
        if key == "enum":
            return lambda v: any(equal(e, v) for e in value)
        if key == "const":
            return lambda v: equal(v, value)
        if key in ("anyOf", "oneOf", "allOf"):
            subs = [self.schema(s) for s in value]
            if key == "anyOf":
                return lambda v: any(s(v) for s in subs)
            if key == "allOf":
                return lambda v: all(s(v) for s in subs)
            return lambda v: sum(1 for s in subs if s(v)) == 1
        if key == "not":
            sub = self.schema(value)
            return lambda v: not sub(v)
        if key == "if":
            test = self.schema(value)
            then = self.schema(node.get("then", True))
            other = self.schema(node.get("else", True))
            return lambda v: then(v) if test(v) else other(v)
        return self.typed(key, value, node)

    def typed(self, key: str, value: Any, node: Mapping[str, Any]) -> Check:
        """A keyword that applies to one type of instance and passes every other."""
        if key == "properties":
            props = {name: self.schema(s) for name, s in value.items()}
            return lambda v: (
                not isinstance(v, dict)
                or all(check(v[name]) for name, check in props.items() if name in v)
            )
        if key == "additionalProperties":
            if "patternProperties" in node:
                raise _Unsupported(key)
            known = frozenset(node.get("properties", {}))
            sub = self.schema(value)
            return lambda v: (
                not isinstance(v, dict)
                or all(sub(item) for name, item in v.items() if name not in known)
            )
        if key == "required":
            return lambda v: not isinstance(v, dict) or all(name in v for name in value)
        if key == "propertyNames":
            sub = self.schema(value)
            return lambda v: not isinstance(v, dict) or all(sub(name) for name in v)
        if key == "minProperties":
            return lambda v: not isinstance(v, dict) or len(v) >= value
        if key == "items":
            if "prefixItems" in node:
                raise _Unsupported(key)
            sub = self.schema(value)
            return lambda v: not isinstance(v, list) or all(sub(item) for item in v)
        if key == "minItems":
            return lambda v: not isinstance(v, list) or len(v) >= value
        if key == "uniqueItems":
            return lambda v: not value or not isinstance(v, list) or _unique(v)
        if key == "minLength":
            return lambda v: not isinstance(v, str) or len(v) >= value
        if key == "maxLength":
            return lambda v: not isinstance(v, str) or len(v) <= value
        if key == "pattern":
            regex = re.compile(value)
            return lambda v: not isinstance(v, str) or regex.search(v) is not None
        if key == "minimum":
            return lambda v: not _is_number(v) or v >= value
        if key == "maximum":
            return lambda v: not _is_number(v) or v <= value
        if key == "exclusiveMinimum":
            return lambda v: not _is_number(v) or v > value
        raise _Unsupported(key)


def compile_validity(schema: Mapping[str, Any]) -> Check | None:
    """A predicate that is True only for documents jsonschema finds valid under
    ``schema`` (False means: ask jsonschema), or None when ``schema`` uses what this
    compiler does not implement."""
    try:
        return _Compiler(schema).schema(schema)
    except (_Unsupported, KeyError, re.error):
        return None
