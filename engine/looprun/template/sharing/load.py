"""Loading templates under a resolver: what ``lock`` and ``update`` both do before they
write, collecting every problem so nothing is written when any template is wrong."""

from __future__ import annotations

from looprun.errors import Problem, TemplateError
from looprun.template.loader import load_template
from looprun.template.sharing.resolver import Resolver, session


def load_all(resolver: Resolver, names: list[str]) -> list[Problem]:
    """Load each template with ``resolver`` in force; the problems of all of them."""
    problems: list[Problem] = []
    with session(resolver):
        for name in names:
            try:
                load_template(name)
            except TemplateError as exc:
                problems.extend(exc.problems)
    return problems
