"""The one expression language of templates: Jinja2 in an immutable sandbox.

Conditions and message templates are compiled once, at load time, so a typo is a
validation error with a location rather than a crash in iteration six. Facts reach
expressions only as plain data (dicts, lists, scalars). Dicts behave as records:
``tests.items`` is the key ``items``, never the dict method, and no method of a
dict can be reached from a template at all.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pathspec
from jinja2 import StrictUndefined, TemplateSyntaxError, UndefinedError, meta, nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

from looprun.errors import ExpressionError, Location, Problem, TemplateError


def matching(paths: Iterable[str] | None, *globs: str) -> list[str]:
    """Paths among ``paths`` that match any gitignore-style glob (``**`` understood)."""
    if not paths:
        return []
    spec = pathspec.GitIgnoreSpec.from_lines(globs)
    return [p for p in paths if spec.match_file(p)]


class ShellCode(str):
    """A value that is trusted shell code (a template author's or invoker's command).

    Everything else substituted into an observer's ``run`` command is shell-quoted.
    """


class _RecordEnvironment(ImmutableSandboxedEnvironment):
    """Sandbox where dict keys win over dict attributes and dict methods are unreachable."""

    def getattr(self, obj: Any, attribute: str) -> Any:
        if isinstance(obj, Mapping):
            try:
                return obj[attribute]
            except (KeyError, TypeError):
                return self.undefined(obj=obj, name=attribute)
        return super().getattr(obj, attribute)


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
    env.globals.update({"matching": matching})
    return env


ENV = _make_env()
SHELL_ENV = _make_env(finalize=_quote_for_shell)


@dataclass(frozen=True)
class NameUse:
    """Top-level names an expression reads, and the ``name.attr`` pairs it reads."""

    names: frozenset[str]
    attributes: frozenset[tuple[str, str]]


def _name_use(ast: nodes.Template) -> NameUse:
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


def _syntax_problem(location: Location, kind: str, exc: TemplateSyntaxError) -> TemplateError:
    # Jinja's lineno is relative to the expression; for one-line sources it is 1.
    return TemplateError([Problem(location, f"invalid {kind}: {exc.message}")])


@dataclass(frozen=True)
class Condition:
    """A boolean expression such as ``tests.failed > 0 and iteration < 3``."""

    source: str
    location: Location
    use: NameUse
    _fn: Callable[..., Any] = field(repr=False, compare=False)

    def evaluate(self, context: Mapping[str, Any]) -> bool:
        """Evaluate against plain-data facts; any undefined name is an error, never False."""
        try:
            return bool(self._fn(**context))
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


@dataclass(frozen=True)
class Text:
    """A message or prompt template. Values substituted into it stay data."""

    source: str
    location: Location
    use: NameUse
    shell: bool = False
    _template: Any = field(repr=False, compare=False, default=None)

    def render(self, context: Mapping[str, Any]) -> str:
        try:
            return self._template.render(**context)
        except UndefinedError as exc:
            raise ExpressionError(f"{self.location}", f"in template: {exc}") from None
        except SecurityError as exc:
            raise ExpressionError(f"{self.location}", f"not allowed: {exc}") from None
        except Exception as exc:
            raise ExpressionError(f"{self.location}", f"{type(exc).__name__}: {exc}") from None

    def __str__(self) -> str:
        return self.source


def compile_condition(source: str, location: Location) -> Condition:
    """Compile a condition once. Raises TemplateError naming the location on bad syntax."""
    text = str(source).strip()
    if not text:
        raise TemplateError([Problem(location, "condition is empty")])
    try:
        fn = ENV.compile_expression(text, undefined_to_none=False)
        ast = ENV.parse("{{ (" + text + ") }}")
    except TemplateSyntaxError as exc:
        raise _syntax_problem(location, "condition", exc) from None
    return Condition(text, location, _name_use(ast), fn)


def compile_text(source: str, location: Location, *, shell: bool = False) -> Text:
    """Compile a message/prompt template once (``shell=True`` quotes substituted values)."""
    env = SHELL_ENV if shell else ENV
    try:
        ast = env.parse(source)
        template = env.from_string(source)
    except TemplateSyntaxError as exc:
        raise _syntax_problem(location, "template", exc) from None
    return Text(source, location, _name_use(ast), shell, template)


def freeze(value: Any) -> Any:
    """Deep-freeze plain data: dicts become read-only mappings, lists become tuples."""
    from types import MappingProxyType

    if isinstance(value, Mapping):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """The inverse of freeze: plain dicts and lists, for JSON output and expression contexts."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(v) for v in value]
    return value
