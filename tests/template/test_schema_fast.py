"""The schema's fast validity check agrees with jsonschema, document for document.

``schema_problems`` returns no problems without asking jsonschema when the compiled check
finds a document valid, so that check must never call valid what jsonschema does not.
It is held against jsonschema on the composed built-in templates, on every YAML file of
the repository (the broken ones under tests/ included), and on documents mutated from
the built-ins, under both the published schema and the composed one.
"""

from __future__ import annotations

import contextlib
import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from tests.support.repo_files import repo_files

from looprun.system.resources import builtin_names, builtin_template
from looprun.template import schema_check
from looprun.template.compose import compose
from looprun.template.schema_fast import compile_validity, equal

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = {
    "published": schema_check.template_schema(),
    "composed": schema_check.composed_schema(schema_check.template_schema()),
}
CHECKS = {name: compile_validity(schema) for name, schema in SCHEMAS.items()}
JSONSCHEMA = {name: Draft202012Validator(schema) for name, schema in SCHEMAS.items()}
COMPOSED = {name: compose(builtin_template(name)).data for name in builtin_names()}


def _yaml_documents() -> list[tuple[str, Any]]:
    found = []
    for path in repo_files("*.yaml"):
        with contextlib.suppress(yaml.YAMLError, UnicodeDecodeError, RecursionError):
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
            yaml.safe_dump(doc)  # a self-referencing alias is no JSON document
            found.append((str(path.relative_to(ROOT)), doc))
    return found


DOCUMENTS = _yaml_documents()


def _agree(schema: str, doc: Any) -> bool:
    fast = CHECKS[schema]
    assert fast is not None
    valid = next(JSONSCHEMA[schema].iter_errors(doc), None) is None
    assert fast(doc) == valid, (schema, valid)
    return valid


def test_the_template_schema_compiles_to_a_fast_check() -> None:
    assert all(check is not None for check in CHECKS.values())


@pytest.mark.parametrize("name", sorted(COMPOSED))
def test_the_built_in_templates_are_valid_both_ways(name: str) -> None:
    assert _agree("composed", COMPOSED[name])


@pytest.mark.parametrize("schema", sorted(SCHEMAS))
@pytest.mark.parametrize("where", [w for w, _ in DOCUMENTS])
def test_every_yaml_file_is_judged_as_jsonschema_judges_it(schema: str, where: str) -> None:
    _agree(schema, dict(DOCUMENTS)[where])


def test_the_files_judged_include_invalid_ones() -> None:
    verdicts = [_agree("published", doc) for _, doc in DOCUMENTS]
    assert verdicts.count(False) >= 10 and verdicts.count(True) >= 10


JUNK = st.sampled_from(
    [None, 0, -1, 1.0, 2.5, True, False, "", "x", "1h", "-", [], [1, 1], ["a", "a"], {},
     {"x": 1}, {"when": "true"}, "a b", 10**6, "retry", "stop"]
)  # fmt: skip


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, (*prefix, i))
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(COMPOSED)), data=st.data())
def test_mutated_templates_are_judged_as_jsonschema_judges_them(
    name: str, data: st.DataObject
) -> None:
    doc = copy.deepcopy(COMPOSED[name])
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        path = data.draw(st.sampled_from(_paths(doc)), label="path")
        parent = doc
        for part in path[:-1]:
            parent = parent[part]
        op = data.draw(st.sampled_from(["delete", "replace", "add"]), label="op")
        if op == "delete":
            del parent[path[-1]]
        elif op == "replace":  # a copy: a later mutation must not edit JUNK's own [] or {}
            parent[path[-1]] = copy.deepcopy(data.draw(JUNK, label="value"))
        elif isinstance(parent, dict):
            key = data.draw(st.sampled_from(["extra", "9bad", "when", "max"]))
            parent[key] = copy.deepcopy(data.draw(JUNK))
    for schema in SCHEMAS:
        _agree(schema, doc)


@pytest.mark.parametrize(
    ("one", "two", "same"),
    [(1, 1.0, True), (True, 1, False), (False, 0, False), ([1, True], [1, True], True),
     ([True], [1], False), ({"a": 1}, {"a": 1.0}, True), ({"a": 1}, {"a": True}, False),
     ("1", 1, False), (None, None, True), ([], {}, False)],
)  # fmt: skip
def test_equality_is_json_schemas(one: Any, two: Any, same: bool) -> None:
    assert equal(one, two) is same
    enum = Draft202012Validator({"enum": [two]})
    assert enum.is_valid(one) is same


def test_a_schema_beyond_the_compiled_keywords_has_no_fast_check() -> None:
    assert compile_validity({"contains": {"type": "string"}}) is None
    assert compile_validity({"$ref": "https://example.com/other.json"}) is None
    assert (
        compile_validity({"patternProperties": {"^x": {}}, "additionalProperties": False}) is None
    )
    assert compile_validity({"type": "object", "unknownKeyword": 1}) is None
