"""The jinja2 traps the design names, each checked against the real expression language."""

from __future__ import annotations

import pytest

from looprun.errors import ExpressionError, Location
from looprun.template.expressions import compile_condition

HERE = Location("t.yaml", 3, 7)


def facts() -> dict:
    return {"tests": {"failed": 1, "items": [1, 2], "ok": False}, "inputs": {"a": 1}}


def test_an_undefined_result_is_an_error_naming_the_rule_never_none() -> None:
    # compile_expression's default would turn `... and itr` into None, i.e. silently false
    with pytest.raises(ExpressionError, match=r"t\.yaml:3:7 .*'itr' is undefined"):
        compile_condition("tests.failed > 0 and itr", HERE).evaluate(facts())


def test_fact_names_that_are_dict_methods_reach_the_fact() -> None:
    assert compile_condition("tests.items | length == 2", HERE).evaluate(facts()) is True


@pytest.mark.parametrize(
    "source", ["inputs.update({'a': 2}) or true", "inputs.pop('a')", "tests.keys()"]
)
def test_conditions_cannot_call_methods_or_mutate_the_facts(source: str) -> None:
    ctx = facts()
    with pytest.raises(ExpressionError):
        compile_condition(source, HERE).evaluate(ctx)
    assert ctx == facts()


def test_dunder_attributes_are_unreachable() -> None:
    with pytest.raises(ExpressionError):
        compile_condition("inputs.__class__.__mro__", HERE).evaluate(facts())
