"""Loading an expression without generating its code gives what generating it gave.

``compile_text``/``compile_condition`` walk the parsed expression themselves and leave
Jinja's code generation to the first use. Each case here is compiled both ways: through
the engine, and the way Jinja alone does it (``from_string``/``compile_expression``, then
``find_undeclared_variables``). The errors, the names read and what the expression
renders or evaluates to must be the same, for every string in the repository's YAML
files and for shapes chosen to sit on the edges of the walk.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from jinja2 import TemplateSyntaxError, meta
from tests.support.repo_files import repo_files

from looprun.errors import Location, TemplateError
from looprun.template import jinja_scan
from looprun.template.compile_cache import compiled_text
from looprun.template.expressions import (
    ENV,
    SHELL_ENV,
    UNTRUSTED_ENV,
    compile_condition,
    compile_text,
)

ROOT = Path(__file__).resolve().parents[2]
HERE = Location("t.yaml", 2, 5)

EDGE_TEXTS = [
    "plain text, no expression",
    "{{ tests.failed }} of {{ tests['tests'] }}",
    "{% for x in xs %}{{ x }}{{ loop.index }}{% endfor %}{{ x }}",
    "{% for x in x %}{{ x.name }}{% endfor %}",
    "{% for a, b in pairs %}{{ a }}={{ b }}{{ c }}{% endfor %}",
    "{% for a in xs %}{% for b in a %}{{ a }}{{ b }}{{ d }}{% endfor %}{% endfor %}",
    "{% for x in xs if x.ok %}{{ x }}{% endfor %}",
    "{% for x in xs %}{{ x }}{% else %}{{ empty }}{% endfor %}",
    "{% for x in xs recursive %}{{ loop(x.kids) }}{% endfor %}",
    "{% for loop in xs %}{{ loop }}{% endfor %}",
    "{% for self in xs %}{{ self }}{% endfor %}",
    "{{ loop }} {{ self }} {{ range(3) | list }} {{ matching(a, 'x') }}",
    "{% if a %}{{ b | nosuchfilter }}{% endif %}",
    "{{ b | nosuchfilter }}",
    "{{ b is nosuchtest }}",
    "{% if a is nosuchtest %}x{% endif %}",
    "{{ x if y else z | nosuchfilter }}",
    "{% set n = tests.failed %}{{ n }} {{ m }}",
    "{% macro m(caller) %}x{% endmacro %}",
    "{% block b %}{% endblock %}{% block b %}{% endblock %}",
    "{% with q = 1 %}{{ q }}{{ r }}{% endwith %}",
    "{% filter upper %}{{ s }}{% endfilter %}",
    "{{ ns.a }}{% set ns = namespace(a=1) %}",
    "{{ x.y.z }} {{ x['k'] }} {{ x[0] }} {{ f(a=b, *c, **d) }}",
    "{{ (a, b) }} {{ [a, b][0] }} {{ {'k': v} }} {{ a ~ b }} {{ -a }} {{ not a }}",
    "{{ a[1:n] }} {{ 1 + 2 * 3 }} {{ 'a' * 3 }}",
    "{% if a %}{{ b }}{% elif c %}{{ d }}{% else %}{{ e }}{% endif %}",
    "{{ unclosed",
    "{% for x in %}{% endfor %}",
    "{% endfor %}",
    'run "{{ quoted }}" now',
]
EDGE_CONDITIONS = [
    "tests.failed > 0 and iteration < 3",
    "true",
    "1",
    "'x'",
    "none",
    "x.y | length > 0",
    "a is nosuchtest",
    "a | nosuchfilter",
    "a if b else c | nosuchfilter",
    "a, b",
    "(a, b)",
    "a }} {{ b",
    "a) + (b",
    "a = 1",
    "matching(diff.files, 'src/**') and self",
    "loop.index",
    "x[1:2] == y['k']",
    "",
    "   ",
    "a and",
]


def _strings(doc: Any) -> list[str]:
    """Every string in a YAML document (each node once: an alias may point back up)."""
    out, stack, seen = [], [doc], set()
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, (dict, list)) and id(value) not in seen:
            seen.add(id(value))
            stack.extend(value.values() if isinstance(value, dict) else value)
    return out


def _corpus() -> list[str]:
    found: set[str] = set()
    for path in repo_files("*.yaml"):
        try:
            docs = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
        except (yaml.YAMLError, UnicodeDecodeError):
            continue
        for doc in docs:
            found.update(s for s in _strings(doc) if len(s) < 5000)
    return sorted(found)


CORPUS = _corpus()


def _jinja_text(source: str, shell: bool) -> tuple[str, Any]:
    """What Jinja alone makes of a text: ("error", message) or ("ok", (names, template))."""
    env = SHELL_ENV if shell else ENV
    try:
        ast = env.parse(source)
        template = env.from_string(source)
        names = meta.find_undeclared_variables(ast)
    except TemplateSyntaxError as exc:
        return "error", f"invalid template: {exc.message}"
    return "ok", (frozenset(names) - set(ENV.globals), template)


def _jinja_condition(source: str, untrusted: bool) -> tuple[str, Any]:
    env = UNTRUSTED_ENV if untrusted else ENV
    try:
        fn = env.compile_expression(source, undefined_to_none=False)
        ast = ENV.parse("{{ (" + source + ") }}")
        names = meta.find_undeclared_variables(ast)
    except TemplateSyntaxError as exc:
        return "error", f"invalid condition: {exc.message}"
    return "ok", (frozenset(names) - set(ENV.globals), fn)


def _outcome(fn: Any) -> tuple[str, str]:
    try:
        return "value", repr(fn())
    except Exception as exc:  # an ExpressionError from ours, Jinja's own from Jinja
        return "raises", type(exc).__name__


CONTEXT = {
    "tests": {"failed": 1, "tests": 3, "items": [1, 2]},
    "xs": [{"ok": True, "name": "a"}, {"ok": False, "name": "b"}],
    "x": [{"name": "n"}],
    "pairs": [[1, 2]],
    "a": [[1]],
    "b": 2,
    "c": 3,
    "quoted": "$(id)",
}


@pytest.mark.parametrize("shell", [False, True])
@pytest.mark.parametrize("source", EDGE_TEXTS + CORPUS)
def test_a_text_compiles_as_jinja_compiles_it(source: str, shell: bool) -> None:
    kind, jinja = _jinja_text(source, shell)
    try:
        text = compile_text(source, HERE, shell=shell)
    except TemplateError as exc:
        message = exc.problems[0].message
        if kind == "ok":  # the one check of ours on top of Jinja's: quotes in a command
            assert shell and "inside shell quotes" in message, (source, message)
        else:
            assert message == jinja, source
        return
    assert kind == "ok", (source, jinja)
    names, template = jinja
    assert text.use.names == names, source
    ours = _outcome(lambda: text.render(CONTEXT))
    theirs = _outcome(lambda: template.render(**CONTEXT))
    assert ours[0] == theirs[0], (source, ours, theirs)
    if ours[0] == "value":
        assert ours == theirs, source


@pytest.mark.parametrize("untrusted", [False, True])
@pytest.mark.parametrize("source", EDGE_CONDITIONS + CORPUS)
def test_a_condition_compiles_as_jinja_compiles_it(source: str, untrusted: bool) -> None:
    text = source.strip()
    kind, jinja = _jinja_condition(text, untrusted) if text else ("error", "condition is empty")
    try:
        cond = compile_condition(source, HERE, untrusted=untrusted)
    except TemplateError as exc:
        message = exc.problems[0].message
        if kind == "ok":  # the planned-condition subset is ours, checked after Jinja's
            assert untrusted and ("planned condition" in message or "model" in message), message
        else:
            assert message == jinja, source
        return
    assert kind == "ok", (source, jinja)
    names, fn = jinja
    assert cond.use.names == names, source
    ours = _outcome(lambda: cond.evaluate(CONTEXT))
    theirs = _outcome(lambda: bool(fn(**CONTEXT)))
    assert ours[0] == theirs[0], (source, ours, theirs)
    if ours[0] == "value":
        assert ours == theirs, source


def test_the_corpus_is_the_repositorys_templates() -> None:
    # the equality above is only as good as what it is run on
    assert len(CORPUS) > 300
    assert sum("{%" in s for s in CORPUS) >= 5 and sum("{{" in s for s in CORPUS) > 40


def test_most_expressions_are_answered_without_code_generation() -> None:
    """The walk, not Jinja's code generator, answers for nearly every expression the
    built-in templates hold; that is what makes loading them fast."""
    parsed = []
    for source in CORPUS:
        try:
            parsed.append(ENV.parse(source))
        except TemplateSyntaxError:
            continue
    answered = sum(jinja_scan.undeclared_names(ast, ENV) is not None for ast in parsed)
    assert answered >= 0.95 * len(parsed), (answered, len(parsed))


def test_code_is_generated_once_for_every_copy_of_a_text() -> None:
    first = compiled_text("{{ tests.failed }} failing", False, Location("a.yaml", 1, 1))
    second = compiled_text("{{ tests.failed }} failing", False, Location("b.yaml", 9, 1))
    assert first.location != second.location
    assert first.render(CONTEXT) == second.render(CONTEXT) == "1 failing"
    assert first._template is second._template
