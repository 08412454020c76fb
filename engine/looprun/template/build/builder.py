"""Build typed Template objects from a composed document, checking what a schema cannot.

Every condition, prompt and message is compiled once here, and every name it reads is
checked against what will exist when it is evaluated (the checks themselves live in
``semantic``). The builder never stops at the first mistake: it records a located
Problem and carries on, so one run of ``looprun validate`` shows everything that is
wrong. It tolerates data the schema has already rejected (skipping what it cannot
check) and never raises on bad input. Each section has its own module in this package.
"""

from __future__ import annotations

from typing import Any

from looprun.data.freeze import freeze
from looprun.template.build.act import build_act
from looprun.template.build.each_task import build_each_task
from looprun.template.build.exit import build_exit
from looprun.template.build.inputs import build_inputs
from looprun.template.build.limits import build_limits
from looprun.template.build.observe import build_observers
from looprun.template.build.plan import build_plan
from looprun.template.build.reader import Reader
from looprun.template.build.refine import build_refine
from looprun.template.build.sandbox import build_sandbox
from looprun.template.model import ContextSpec, InputSpec, ObserverSpec, Template
from looprun.template.schema_check import template_schema


class Builder(Reader):
    """Builds one Template from a composed Document, collecting every Problem."""

    def inputs(self) -> dict[str, InputSpec]:
        return build_inputs(self)

    def observe(self) -> dict[str, ObserverSpec]:
        return build_observers(self)

    def build(self) -> Template | None:
        data = self.data
        inputs = self.inputs()
        models = {
            k: v for k, v in (self.get(("models",), dict) or {}).items() if isinstance(v, str)
        }
        observe = self.observe()
        plan = build_plan(self)
        outer = "each_task" in data
        each_task = build_each_task(self, plan)
        act = build_act(self, outer)
        exit_ = build_exit(self, plan, outer)
        refine = build_refine(self)
        limits = build_limits(self)
        context = ContextSpec(
            budget_tokens=self.get(("context", "budget_tokens"), int, ContextSpec.budget_tokens),
            recent_rounds=self.get(("context", "recent_rounds"), int, ContextSpec.recent_rounds),
        )
        sandbox = build_sandbox(self)
        if self.problems:
            return None
        return Template(
            name=str(data.get("name", "")),
            source=str(self.doc.path),
            description=str(data.get("description", "") or ""),
            inputs=freeze(inputs),
            models=freeze(models),
            plan=plan,
            act=act,
            observe=freeze(observe),
            exit=tuple(exit_),
            refine=tuple(refine),
            limits=limits,
            context=context,
            each_task=each_task,
            sandbox=sandbox,
            resolved=freeze(_canonical_order(data)),
            input_numbers=freeze(self.input_numbers),
        )


def _canonical_order(data: dict[str, Any]) -> dict[str, Any]:
    """Top-level keys in the schema's order, whatever order composition merged them in."""
    order = list(template_schema()["properties"])
    known = {k: data[k] for k in order if k in data}
    return {**known, **{k: v for k, v in data.items() if k not in known}}
