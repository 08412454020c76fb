"""The one expression language of templates: Jinja2 in an immutable sandbox.

Conditions and message templates are compiled once, at load time, so a typo is a
validation error with a location rather than a crash in iteration six. Facts reach
expressions only as plain data (dicts, lists, scalars). Dicts behave as records:
``tests.items`` is the key ``items``, never the dict method, and no method of a
dict can be reached from a template at all.
"""

from __future__ import annotations

import functools
import itertools
import shlex
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import field
from types import CodeType
from typing import Any

from jinja2 import StrictUndefined, TemplateSyntaxError, UndefinedError, meta, nodes
from jinja2.environment import Template, TemplateExpression
from jinja2.parser import Parser
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

from looprun.data.globs import matcher, matching
from looprun.data.value import valueclass
from looprun.errors import ExpressionError, Location, Problem, TemplateError
from looprun.template.jinja_scan import undeclared_names


def without(items: Iterable[Any] | None, *others: Iterable[Any] | None) -> list[Any]:
    """The items of ``items`` that are in none of ``others`` (order kept): the ids the
    reproduce task made fail that do not pass now, ``without(ids, tests.passing)``."""
    drop: set[Any] = set()
    for other in others:
        drop.update(other or ())
    return [i for i in (items or ()) if i not in drop]


def values_at(mapping: Mapping[Any, Any] | None, keys: Iterable[Any] | None) -> list[Any]:
    """The values of ``mapping`` at ``keys`` (order kept, keys it lacks skipped): the
    exception each newly failing test raised, ``values_at(tests.failure_types, ids)``."""
    if not mapping:
        return []
    return [mapping[k] for k in (keys or ()) if k in mapping]


def confined(
    mapping: Mapping[Any, Any] | None, keys: Iterable[Any] | None, *globs: str
) -> list[Any]:
    """The keys (order kept) whose paths in ``mapping`` all match the globs, none counting
    as all; keys it lacks are skipped: the newly failing tests whose body ran no code
    outside the tests, ``confined(tests.exercised, ids, inputs.tests_glob)``."""
    if not mapping:
        return []
    match = matcher(globs)
    out = []
    for key in keys or ():
        if key in mapping and all(match(p) for p in mapping[key] or ()):
            out.append(key)
    return out


def touching(files_by_key: Mapping[Any, Any] | None, paths: Iterable[str] | None) -> list[Any]:
    """The keys of ``files_by_key`` whose files include any of ``paths`` (sorted): the
    failures that ran through a file the run changed,
    ``touching(baseline.tests.failure_files, diff.files)``."""
    if not files_by_key:
        return []
    wanted = set(paths or ())
    return sorted(
        k
        for k, files in files_by_key.items()
        if isinstance(files, (list, tuple)) and wanted.intersection(files)
    )


class ShellCode(str):
    """A value that is trusted shell code (a template author's or invoker's command).

    Everything else substituted into an observer's ``run`` command is shell-quoted.
    """


# Bounds on what one expression may build, so a condition (possibly written by a model
# planner) cannot exhaust memory or CPU with ``'a' * 10**10`` or ``9 ** 10**8``.
MAX_SEQUENCE_ITEMS = 1_000_000
MAX_POWER_BITS = 4096


def _size(value: Any) -> int | None:
    return len(value) if isinstance(value, (str, bytes, list, tuple)) else None


class _RecordEnvironment(ImmutableSandboxedEnvironment):
    """Sandbox where dict keys win over dict attributes and dict methods are unreachable."""

    intercepted_binops = frozenset({"*", "**"})

    def getattr(self, obj: Any, attribute: str) -> Any:
        if isinstance(obj, Mapping):
            try:
                return obj[attribute]
            except (KeyError, TypeError):
                return self.undefined(obj=obj, name=attribute)
        return super().getattr(obj, attribute)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        """``*`` and ``**`` with bounded results; everything else as Python does it."""
        if operator == "*":
            for seq, times in ((left, right), (right, left)):
                size = _size(seq)
                if (
                    size is not None
                    and isinstance(times, int)
                    and size * times > (MAX_SEQUENCE_ITEMS)
                ):
                    raise SecurityError(f"repetition builds more than {MAX_SEQUENCE_ITEMS} items")
            return left * right
        if operator == "**":
            if (
                isinstance(left, int)
                and isinstance(right, int)
                and abs(left) > 1
                and right > 0
                and right * abs(left).bit_length() > MAX_POWER_BITS
            ):
                raise SecurityError(f"power result larger than {MAX_POWER_BITS} bits")
            return left**right
        return super().call_binop(context, operator, left, right)


def _quote_for_shell(value: Any) -> str:
    if isinstance(value, ShellCode):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return " ".join(shlex.quote(str(v)) for v in value)
    return shlex.quote(str(value))


def _make_env(**kwargs: Any) -> ImmutableSandboxedEnvironment:
    env = _RecordEnvironment(
        undefined=StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        **kwargs,
    )
    env.globals.update(
        {
            "matching": matching,
            "without": without,
            "values_at": values_at,
            "confined": confined,
            "touching": touching,
        }
    )
    return env


ENV = _make_env()
SHELL_ENV = _make_env(finalize=_quote_for_shell)

# A condition a model wrote is evaluated under a budget: no value it builds, and no value
# a filter or operator is given, may weigh more than this (characters of strings plus
# items of lists, counted through nesting), so joins, repetition and concatenation of
# repeated values cannot add up to gigabytes.
UNTRUSTED_MAX_WEIGHT = 250_000


def _weight(value: Any, budget: int = UNTRUSTED_MAX_WEIGHT + 1) -> int:
    """Characters + items in ``value``, counted until ``budget`` is passed."""
    total = 0
    stack = [value]
    while stack and total <= budget:
        v = stack.pop()
        if isinstance(v, (str, bytes)):
            total += len(v)
        elif isinstance(v, Mapping):
            total += len(v)
            stack.extend(v.values())
        elif isinstance(v, (list, tuple, set, frozenset)):
            total += len(v)
            stack.extend(v)
        else:
            total += 1
    return total


def _within_budget(*values: Any, weight: int = 0) -> None:
    """Refuse when the values (plus ``weight`` more) weigh over the budget."""
    for v in values:
        weight += _weight(v)
    if weight > UNTRUSTED_MAX_WEIGHT:
        raise SecurityError(
            f"a planned condition may not build values over {UNTRUSTED_MAX_WEIGHT} characters/items"
        )


def _bounded_filter(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` refusing inputs and results over the budget (keeps Jinja's pass_* marks)."""

    @functools.wraps(fn)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        for value in (*args, *kwargs.values()):
            if not isinstance(value, _JINJA_PASSED):
                _within_budget(value)
        result = fn(*args, **kwargs)
        if isinstance(result, Iterator):
            result = list(itertools.islice(result, UNTRUSTED_MAX_WEIGHT + 1))
        _within_budget(result)
        return result

    return bounded


class _UntrustedEnvironment(_RecordEnvironment):
    """The sandbox for model-written conditions: ``%`` formatting refused, ``*`` and
    ``+`` and every filter held to :data:`UNTRUSTED_MAX_WEIGHT`."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "%":
            if isinstance(left, (str, bytes)):
                raise SecurityError("% formatting is not allowed in a planned condition")
            return left % right
        if operator == "*":
            for seq, times in ((left, right), (right, left)):
                if isinstance(times, int) and _size(seq) is not None:
                    _within_budget(weight=_weight(seq) * max(times, 0))
        if operator == "+":
            _within_budget(left, right)
        result = super().call_binop(context, operator, left, right)
        _within_budget(result)
        return result


@valueclass
class NameUse:
    """Top-level names an expression reads, and the ``name.attr`` pairs it reads."""

    names: frozenset[str]
    attributes: frozenset[tuple[str, str]]


def _name_use(ast: nodes.Template, names: frozenset[str] | None = None) -> NameUse:
    """What ``ast`` reads; ``names`` when the undeclared names are known already."""
    if names is None:
        names = frozenset(meta.find_undeclared_variables(ast))
    attrs: set[tuple[str, str]] = set()
    for node in ast.find_all(nodes.Getattr):
        if isinstance(node.node, nodes.Name) and node.node.name in names:
            attrs.add((node.node.name, node.attr))
    for node in ast.find_all(nodes.Getitem):
        if (
            isinstance(node.node, nodes.Name)
            and node.node.name in names
            and isinstance(node.arg, nodes.Const)
            and isinstance(node.arg.value, str)
        ):
            attrs.add((node.node.name, node.arg.value))
    return NameUse(names - set(ENV.globals), frozenset(attrs))


class _Deferred:
    """Code generated on first use, shared by every copy of the value holding it (a
    compiled text is placed at many locations). Generating Python for each expression is
    most of what loading a template costs; a validation runs none of them and a run only
    some. Only an expression whose generation cannot fail is deferred (see jinja_scan),
    so every load-time error is still raised at load."""

    __slots__ = ("_code", "_make")

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make = make
        self._code: Any = None

    def __call__(self) -> Any:
        code = self._code
        if code is None:
            code = self._code = self._make()
        return code


def _ready(code: Any) -> _Deferred:
    deferred = _Deferred(lambda: code)
    deferred._code = code
    return deferred


def _syntax_problem(location: Location, kind: str, exc: TemplateSyntaxError) -> TemplateError:
    # Jinja's lineno is relative to the expression; for one-line sources it is 1.
    return TemplateError([Problem(location, f"invalid {kind}: {exc.message}")])


@valueclass
class Condition:
    """A boolean expression such as ``tests.failed > 0 and iteration < 3``."""

    source: str
    location: Location
    use: NameUse
    _fn: _Deferred = field(repr=False, compare=False)
    # True/False when the condition is a constant (``true``, ``1``, ``'x'``), else None
    constant: bool | None = None

    def evaluate(self, context: Mapping[str, Any]) -> bool:
        """Evaluate against plain-data facts; any undefined name is an error, never False."""
        try:
            return bool(self._fn()(**context))
        except UndefinedError as exc:
            raise ExpressionError(f"{self.location} `{self.source}`", str(exc)) from None
        except SecurityError as exc:
            raise ExpressionError(
                f"{self.location} `{self.source}`", f"not allowed: {exc}"
            ) from None
        except Exception as exc:
            raise ExpressionError(
                f"{self.location} `{self.source}`", f"{type(exc).__name__}: {exc}"
            ) from None

    def __str__(self) -> str:
        return self.source


@valueclass
class Text:
    """A message or prompt template. Values substituted into it stay data."""

    source: str
    location: Location
    use: NameUse
    shell: bool = False
    _template: _Deferred | None = field(repr=False, compare=False, default=None)

    def render(self, context: Mapping[str, Any]) -> str:
        try:
            assert self._template is not None, "a Text is made by compile_text"
            return self._template().render(**context)
        except UndefinedError as exc:
            raise ExpressionError(f"{self.location}", f"in template: {exc}") from None
        except SecurityError as exc:
            raise ExpressionError(f"{self.location}", f"not allowed: {exc}") from None
        except Exception as exc:
            raise ExpressionError(f"{self.location}", f"{type(exc).__name__}: {exc}") from None

    def __str__(self) -> str:
        return self.source


# What a condition written by a model (a planner's ``done_when``) may use: reading facts,
# comparing, and a few filters and functions whose cost does not grow with an argument.
UNTRUSTED_MAX_CHARS = 500
UNTRUSTED_FILTERS = frozenset(
    {"length", "count", "lower", "upper", "int", "float", "string", "abs", "first", "last",
     "min", "max", "sum", "default", "d", "list", "unique", "sort", "round", "trim", "select",
     "reject", "selectattr", "rejectattr", "map", "join"}
)  # fmt: skip
UNTRUSTED_CALLS = frozenset({"matching", "without", "values_at", "confined", "touching"})
_JINJA_PASSED = (Context, ImmutableSandboxedEnvironment)


def _untrusted_env() -> ImmutableSandboxedEnvironment:
    env = _UntrustedEnvironment(undefined=StrictUndefined, autoescape=False)
    env.filters = {n: _bounded_filter(f) for n, f in env.filters.items() if n in UNTRUSTED_FILTERS}
    env.globals.update({n: _bounded_filter(ENV.globals[n]) for n in UNTRUSTED_CALLS})
    return env


UNTRUSTED_ENV = _untrusted_env()


def _untrusted_problem(text: str, ast: nodes.Template) -> str | None:
    """Why a model-written condition is refused, or None when it stays in the safe subset."""
    if len(text) > UNTRUSTED_MAX_CHARS:
        return f"a condition written by a model is limited to {UNTRUSTED_MAX_CHARS} characters"
    for attr in ast.find_all(nodes.Getattr):
        if attr.attr.startswith("_"):
            return f"the attribute {attr.attr!r} is not allowed in a planned condition"
    if any(True for _ in ast.find_all(nodes.Mod)):
        return "the % operator (string formatting) is not allowed in a planned condition"
    for node in ast.find_all(nodes.Filter):
        if node.name not in UNTRUSTED_FILTERS:
            return f"the filter {node.name!r} is not allowed in a planned condition"
    for node in ast.find_all(nodes.Call):
        if not (isinstance(node.node, nodes.Name) and node.node.name in UNTRUSTED_CALLS):
            allowed = ", ".join(sorted(UNTRUSTED_CALLS))
            return f"only calls to {allowed} are allowed in a planned condition"
    return None


def compile_condition(
    source: str,
    location: Location,
    *,
    untrusted: bool = False,
    on_code: Callable[[CodeType], None] | None = None,
) -> Condition:
    """Compile a condition once. Raises TemplateError naming the location on bad syntax.

    ``untrusted=True`` is for conditions a model wrote (a planner's ``done_when``): they
    are held to a small subset (short; no method calls; no ``%``; filters of bounded
    cost) and evaluated under a budget (:data:`UNTRUSTED_MAX_WEIGHT`). ``on_code`` is
    given the Python code Jinja generates for it, when it does.
    """
    text = str(source).strip()
    if not text:
        raise TemplateError([Problem(location, "condition is empty")])
    env = UNTRUSTED_ENV if untrusted else ENV
    try:
        expr = _parse_expression(env, text)
    except TemplateSyntaxError as exc:
        raise _syntax_problem(location, "condition", exc) from None
    names = undeclared_names(expr, env)
    make = _expression_maker(env, text, on_code)
    if names is None:
        try:  # a shape only Jinja's code generator can judge: compile it now
            fn = _ready(make())
        except TemplateSyntaxError as exc:
            raise _syntax_problem(location, "condition", exc) from None
    else:
        fn = _Deferred(make)
    # as ``{{ (text) }}`` parses: a whole expression parses the same inside parentheses
    ast = nodes.Template([nodes.Output([expr], lineno=1)], lineno=1)
    if untrusted:
        problem = _untrusted_problem(text, ast)
        if problem:
            raise TemplateError([Problem(location, problem)])
    if names is None or env is not ENV:
        names = undeclared_names(ast, ENV)
    if names is None:
        ast.set_environment(ENV)
    return Condition(text, location, _name_use(ast, names), fn, _constant(ast))


def _from_code(env: ImmutableSandboxedEnvironment, code: CodeType) -> Template:
    """The template ``code`` (from ``env.compile``) is, as ``env.from_string`` makes it."""
    return env.template_class.from_code(env, code, env.make_globals(None), None)


def _expression_maker(
    env: ImmutableSandboxedEnvironment, text: str, on_code: Callable[[CodeType], None] | None
) -> Callable[[], TemplateExpression]:
    """What ``env.compile_expression(text, undefined_to_none=False)`` does, in two steps
    (generate and compile; then bind), so the code can be kept."""

    def make() -> TemplateExpression:
        expr = _parse_expression(env, text)
        expr.set_environment(env)
        body = [nodes.Assign(nodes.Name("result", "store"), expr, lineno=1)]
        code = env.compile(nodes.Template(body, lineno=1))
        if on_code is not None:
            on_code(code)
        return TemplateExpression(_from_code(env, code), False)

    return make


def _text_maker(
    env: ImmutableSandboxedEnvironment, source: str, on_code: Callable[[CodeType], None] | None
) -> Callable[[], Template]:
    """What ``env.from_string(source)`` does, in two steps, so the code can be kept."""

    def make() -> Template:
        code = env.compile(source)
        if on_code is not None:
            on_code(code)
        return _from_code(env, code)

    return make


def condition_of(
    source: str,
    location: Location,
    use: NameUse,
    constant: bool | None,
    code: CodeType | None,
    on_code: Callable[[CodeType], None] | None = None,
) -> Condition:
    """A trusted condition from what compiling ``source`` gave before: the names it reads,
    its constant truth and, when generated already, its code."""
    text = str(source).strip()
    if code is not None:
        fn = _Deferred(lambda: TemplateExpression(_from_code(ENV, code), False))
    else:
        fn = _Deferred(_expression_maker(ENV, text, on_code))
    return Condition(text, location, use, fn, constant)


def text_of(
    source: str,
    location: Location,
    use: NameUse,
    shell: bool,
    code: CodeType | None,
    on_code: Callable[[CodeType], None] | None = None,
) -> Text:
    """A text from what compiling ``source`` gave before (see :func:`condition_of`)."""
    env = SHELL_ENV if shell else ENV
    if code is not None:
        template = _Deferred(lambda: _from_code(env, code))
    else:
        template = _Deferred(_text_maker(env, source, on_code))
    return Text(source, location, use, shell, template)


def _parse_expression(env: ImmutableSandboxedEnvironment, text: str) -> nodes.Expr:
    """``text`` parsed as ``compile_expression`` parses it (one expression, nothing
    after), raising the same TemplateSyntaxError."""
    parser = Parser(env, text, state="variable")
    expr = parser.parse_expression()
    if not parser.stream.eos:
        raise TemplateSyntaxError("chunk after expression", parser.stream.current.lineno)
    return expr


def _constant(ast: nodes.Template) -> bool | None:
    output = ast.body[0]
    if isinstance(output, nodes.Output) and len(output.nodes) == 1:
        node = output.nodes[0]
        if isinstance(node, nodes.Const):
            return bool(node.value)
    return None


def _scan_quotes(data: str, state: str) -> str:
    """The shell quoting state ("", "'" or '"') after the literal text ``data``."""
    i = 0
    while i < len(data):
        c = data[i]
        if state == "'":
            if c == "'":
                state = ""
        elif c == "\\":
            i += 1  # an escaped character, outside single quotes
        elif state == '"':
            if c == '"':
                state = ""
        elif c in "'\"":
            state = c
        i += 1
    return state


def _substitution_in_quotes(env: ImmutableSandboxedEnvironment, source: str) -> int | None:
    """The line of the first ``{{ }}`` placed inside shell quotes, if any.

    Substituted values are quoted already; inside ``"..."`` or ``'...'`` that quoting
    would be undone (``"$(cmd)"`` runs ``cmd``), so such a command is refused at load time.
    """
    state = ""
    for lineno, kind, value in env.lex(source):
        if kind == "data":
            state = _scan_quotes(value, state)
        elif kind == "variable_begin" and state:
            return lineno
    return None


def compile_text(
    source: str,
    location: Location,
    *,
    shell: bool = False,
    on_code: Callable[[CodeType], None] | None = None,
) -> Text:
    """Compile a message/prompt template once (``shell=True`` quotes substituted values).
    ``on_code`` is given the Python code Jinja generates for it, when it does."""
    env = SHELL_ENV if shell else ENV
    try:
        ast = env.parse(source)
        names = undeclared_names(ast, env)
        make = _text_maker(env, source, on_code)
        # a shape only Jinja's code generator can judge: compile it now
        template = _ready(make()) if names is None else _Deferred(make)
    except TemplateSyntaxError as exc:
        raise _syntax_problem(location, "template", exc) from None
    if shell and _substitution_in_quotes(env, source) is not None:
        raise TemplateError(
            [
                Problem(
                    location,
                    "a {{ }} substitution sits inside shell quotes in a command; remove the "
                    "quotes around it: looprun quotes every substituted value itself (quotes "
                    "around it would let a value such as $(cmd) run as code)",
                )
            ]
        )
    return Text(source, location, _name_use(ast, names), shell, template)


def shell_text(text: Text) -> Text:
    """``text`` compiled as a shell command, so values substituted into it are quoted.

    For a value that becomes trusted shell code later (an input of type ``command``
    mapped in a sub-loop's ``with``): only ``ShellCode`` stays code, all else is data.
    """
    return text if text.shell else compile_text(text.source, text.location, shell=True)
