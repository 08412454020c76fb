"""The models a run talks to: each role's reference resolved (command line > environment >
config file > template), retry events shown and journaled, and missing prices warned of."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from looprun.act.agent_role import AgentActRole, agent_model
from looprun.errors import LooprunError, ModelSetupError, UsageError
from looprun.journal.writer import RunJournal
from looprun.models.base import Model, Unscripted
from looprun.models.config import load_config
from looprun.models.pricing import PriceTable
from looprun.models.registry import model_ref_for_role, resolve_model
from looprun.template.model import Template


class ModelEvents:
    """The model clients' retry events, journaled and shown once the run has a journal;
    carries the config file the models were resolved with."""

    def __init__(self, config: Any = None):

        self.config = load_config() if config is None else config
        self.journal: RunJournal | None = None

    def __call__(self, event: Mapping[str, Any]) -> None:
        data = {k: v for k, v in event.items() if k != "event"}
        if self.journal is not None:
            self.journal.event(str(event.get("event") or "model_event"), **data)
        if event.get("event") == "model_retry":
            click.echo(
                f"model: attempt {data.get('attempt')} of {data.get('max_attempts')} failed "
                f"({data.get('reason')}); retrying in {float(data.get('delay_s') or 0):.1f} s",
                err=True,
            )


def resolve_models(
    template: Template,
    model: str | None,
    plan_model: str | None,
    base_url: str | None,
    events: ModelEvents | None = None,
) -> tuple[Model, Model, dict[str, str]]:
    """The act and plan models: command line > environment > config file > template."""

    events = events or ModelEvents()
    agent = template.act.agent if template.act is not None else None
    if agent is not None:
        return _agent_models(template, agent.cli, agent.model, model, plan_model, base_url, events)
    # the plan role only where something asks it (plan.mode: model); else it is the act model
    roles = roles_used(template)
    try:
        refs = {
            role: model_ref_for_role(
                role,
                cli_model=model,
                cli_role_models={"plan": plan_model},
                config=events.config,
                template_models=template.models,
            )
            for role in roles
        }
    except UsageError:
        if needs_http_model(template):
            raise
        # an outer loop whose sub-loops all act through agent CLIs: nothing to call
        return NO_MODEL, NO_MODEL, {"act": ""}
    refs.setdefault("plan", refs["act"])
    refs = {r: _absolute_script(v) for r, v in refs.items()}

    def resolve(ref: str) -> Model:
        return resolve_model(ref, base_url=base_url, config=events.config, on_event=events)

    act = resolve(refs["act"])
    if "plan" not in roles:  # nothing asks the plan role: do not demand its key
        return act, act, refs
    if refs["plan"] == refs["act"]:
        return act, act, refs
    try:
        return act, resolve(refs["plan"]), refs
    except (UsageError, ModelSetupError) as exc:
        if template.plan.mode == "model":
            raise
        # only held-out variants ask the plan role: a plan model that cannot be used (its
        # key unset) leaves them to the act model, in a context of their own
        click.echo(
            f"note: held-out variants are asked of the act model ({refs['act']}): {exc}",
            err=True,
        )
        return act, act, {**refs, "plan": refs["act"]}


def _agent_models(
    template: Template,
    cli: str,
    declared: str,
    model: str | None,
    plan_model: str | None,
    base_url: str | None,
    events: ModelEvents,
    *,
    plan: bool = True,
) -> tuple[Model, Model, dict[str, str]]:
    """act.agent: the CLI's model, named like models.act (command line > environment >
    config file > act.agent.model); the plan role resolves as usual where it is used
    (``plan=False``: the caller resolves it)."""

    config = events.config
    candidates = [
        ("--model", model),
        ("LOOPRUN_ACT_MODEL", os.environ.get("LOOPRUN_ACT_MODEL")),
        ("LOOPRUN_MODEL", os.environ.get("LOOPRUN_MODEL")),
        ("models.act in the config file", config.models.get("act")),
        ("models.default in the config file", config.models.get("default")),
        ("act.agent.model", declared),
    ]
    source, ref = next(((s, r) for s, r in candidates if r and r.strip() != "default"), ("", ""))
    act: Model = AgentActRole(cli, agent_model(cli, ref, source))  # type: ignore[assignment]
    refs = {"act": ref or ""}
    if template.plan.mode != "model" or not plan:
        return act, act, refs

    plan_ref = _absolute_script(
        model_ref_for_role(
            "plan",
            cli_model=None,
            cli_role_models={"plan": plan_model},
            config=config,
            template_models=template.models,
        )
    )
    refs["plan"] = plan_ref
    plan = resolve_model(plan_ref, base_url=base_url, config=config, on_event=events)
    return act, plan, refs


def needs_http_model(template: Template) -> bool:
    """Whether a run of ``template`` calls a model over HTTP itself or in a sub-loop:
    model planning, or act turns of the built-in tool loop. An agent CLI brings its own."""
    if template.plan.mode == "model":
        return True
    if template.each_task is not None:
        return needs_http_model(template.each_task.template)
    return template.act is None or template.act.agent is None


class NoModel(Unscripted):
    """The act role of an outer loop that needs no model (``needs_http_model`` is
    false): it has a reference to pass down ("") and refuses to be called."""

    ref = ""

    def complete(self, *args: object, **kwargs: object) -> Any:

        raise LooprunError("this loop and its sub-loops name no model: none is called")


NO_MODEL: Any = NoModel()


def agent_role(template: Template, cli_model: str | None, config: Any) -> Any:
    """The act role of an ``act.agent`` template run as a sub-loop: its CLI's model
    named like at the top (command line > environment > config file > act.agent.model)."""
    agent = template.act.agent if template.act is not None else None
    assert agent is not None
    events = ModelEvents(config)
    act, _plan, _refs = _agent_models(
        template, agent.cli, agent.model, cli_model, None, None, events, plan=False
    )
    return act


def roles_used(template: Template) -> tuple[str, ...]:
    """The model roles a run of ``template`` calls: plan with ``plan.mode: model``, or
    where held-out variants are asked for (the holdout role uses the plan role's model)."""
    variants = any(
        s.holdout is not None and s.holdout.variants is not None for s in template.observe.values()
    )
    return ("act", "plan") if template.plan.mode == "model" or variants else ("act",)


def price_warnings(
    refs: Mapping[str, str],
    config: Any,
    max_cost_usd: float | None,
    roles: tuple[str, ...] = ("act", "plan"),
) -> list[str]:
    """Models without a price: their cost counts as 0, so max_cost_usd cannot stop them.
    Only the ``roles`` the run calls are warned about."""

    if max_cost_usd is None:
        return []
    table = PriceTable(config.prices)
    out = []
    for role, ref in sorted(refs.items()):
        if role not in roles:
            continue
        scheme, _, name = ref.partition(":")
        if scheme in ("openai", "anthropic") and table.lookup(name) is None:
            out.append(
                f"no price known for {ref} ({role} role): its cost counts as $0, so "
                f"limits.max_cost_usd (${max_cost_usd:g}) cannot be enforced; add it under "
                "prices: in the config file"
            )
    return list(dict.fromkeys(out))


def _absolute_script(ref: str) -> str:
    if ref.startswith("script:"):
        return "script:" + str(Path(ref.removeprefix("script:")).expanduser().resolve())
    return ref
