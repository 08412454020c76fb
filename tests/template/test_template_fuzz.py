"""Property: whatever a mutated template looks like, loading it never crashes.

Mutations start from the built-in templates (delete keys, change types, insert junk into
conditions and prompts, swap values, corrupt the raw text); ``load_template`` must either
return a Template or raise TemplateError - never any other exception.
"""

from __future__ import annotations

import contextlib
import copy
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from looprun.errors import TemplateError
from looprun.system.resources import builtin_names, builtin_template
from looprun.template.loader import load_template
from looprun.template.model import Template

SOURCES = {name: builtin_template(name).read_text("utf-8") for name in builtin_names()}
DOCS = {name: yaml.safe_load(text) for name, text in SOURCES.items()}

JUNK = st.sampled_from(
    [
        None,
        0,
        -1,
        3.5,
        True,
        "",
        "junk",
        [],
        {},
        ["x"],
        {"x": 1},
        "{{",
        "{% if %}",
        "tests.",
        "a b c",
        "}}",
        "lambda: 1",
        "__class__",
        "tests.__class__.__mro__",
        "1h2x",
        "ünïcödé",
        "{{ tests.feedback }",
        "else",
        "retry",
        "rollback",
        "{{ cycler.__init__ }}",
    ]
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, (*prefix, i))
    return out


def _get(node: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        node = node[part]
    return node


def _mutate(doc: Any, data: st.DataObject) -> Any:
    paths = _paths(doc)
    for _ in range(data.draw(st.integers(1, 4), label="mutations")):
        if not paths:
            break
        path = data.draw(st.sampled_from(paths), label="path")
        parent, key = _get(doc, path[:-1]), path[-1]
        op = data.draw(st.sampled_from(["delete", "replace", "junk_in_text", "swap"]), label="op")
        if op == "delete":
            del parent[key]
        elif op == "replace":
            parent[key] = data.draw(JUNK, label="value")
        elif op == "junk_in_text" and isinstance(parent[key], str):
            text = parent[key]
            at = data.draw(st.integers(0, len(text)), label="at")
            junk = data.draw(st.sampled_from(["}}", "{{", " and ", "(", ")", " | x", ".", "%}"]))
            parent[key] = text[:at] + junk + text[at:]
        elif op == "swap":
            other = data.draw(st.sampled_from(paths), label="other")
            with contextlib.suppress(KeyError, IndexError, TypeError):
                parent[key] = copy.deepcopy(_get(doc, other))
        paths = _paths(doc)
    return doc


def _load_text(text: str | bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mutant.yaml"
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, "utf-8")
        try:
            assert isinstance(load_template(path), Template)
        except TemplateError as exc:
            assert exc.problems
            for problem in exc.problems:
                assert problem.message and problem.location.file


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(DOCS)), data=st.data())
def test_mutated_documents_only_raise_template_errors(name: str, data: st.DataObject) -> None:
    doc = _mutate(copy.deepcopy(DOCS[name]), data)
    _load_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))


@settings(max_examples=80, deadline=None)
@given(
    name=st.sampled_from(sorted(SOURCES)),
    at=st.floats(0, 1),
    junk=st.sampled_from(
        ["\t", ":", "- ", "[", "{", "&a ", "*a", "\x00", "'", '"', "\n  x: 1", "#"]
    ),
)
def test_corrupted_text_only_raises_template_errors(name: str, at: float, junk: str) -> None:
    text = SOURCES[name]
    cut = int(len(text) * at)
    _load_text(text[:cut] + junk + text[cut:])
