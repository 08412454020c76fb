"""Model references (``openai:<model>``, ``anthropic:<model>``, ``script:<file>``) to
Model objects, and which reference each role uses.

Precedence for every setting: command line > environment > config file > template.
Environment: ``LOOPRUN_MODEL`` (every role), ``LOOPRUN_<ROLE>_MODEL`` (one role, e.g.
``LOOPRUN_PLAN_MODEL``), ``LOOPRUN_BASE_URL`` (openai-compatible server),
``ANTHROPIC_BASE_URL``; keys from ``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY`` or the
variables the config file names.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from looprun.errors import UsageError
from looprun.models.base import Model
from looprun.models.config import Config, config_path
from looprun.models.scripted import ScriptedModel

if TYPE_CHECKING:
    import httpx

    from looprun.models.http import EventSink

SCHEMES = ("openai", "anthropic", "script")
# Template values meaning "no preference": fall through to the next source.
_NO_PREFERENCE = frozenset({"", "default"})


def _split(ref: str) -> tuple[str, str]:
    scheme, sep, rest = ref.partition(":")
    if not sep or scheme not in SCHEMES or not rest.strip():
        raise UsageError(
            f"unknown model reference {ref!r}: use one of "
            + ", ".join(f"{s}:<{'file' if s == 'script' else 'model'}>" for s in SCHEMES)
        )
    return scheme, rest.strip()


def resolve_model(
    ref: str,
    *,
    base_url: str | None = None,
    config: Config | None = None,
    on_event: EventSink | None = None,
    env: Mapping[str, str] | None = None,
    transport: httpx.BaseTransport | None = None,
    sleep: Callable[[float], None] | None = None,
) -> Model:
    """A Model for ``ref``. ``base_url`` (from ``--base-url``) applies to openai models.

    A hosted server without its API key is refused here, before any run starts. The key
    is read from the environment and lives only in the client's request headers.
    """
    scheme, name = _split(ref)
    if scheme == "script":
        return ScriptedModel.from_file(name)
    from looprun.models.hosted import hosted_model  # the HTTP client: only for one

    return hosted_model(
        scheme,
        name,
        base_url=base_url,
        config=config,
        on_event=on_event,
        env=env,
        transport=transport,
        sleep=sleep,
    )


def model_ref_for_role(
    role: str,
    *,
    cli_model: str | None = None,
    cli_role_models: Mapping[str, str | None] | None = None,
    env: Mapping[str, str] | None = None,
    config: Config | None = None,
    template_models: Mapping[str, str] | None = None,
) -> str:
    """The model reference for ``role``: command line > environment > config > template.

    Within each source a role-specific setting beats the all-roles one (``--plan-model``
    over ``--model``; ``LOOPRUN_PLAN_MODEL`` over ``LOOPRUN_MODEL``; config
    ``models.plan`` over ``models.default``). Raises UsageError when nothing names one.
    """
    env = os.environ if env is None else env
    config = config or Config()
    role_env = f"LOOPRUN_{role.upper()}_MODEL"
    in_config = f" in the config file {config.source}".rstrip()
    candidates = [
        (f"--{role}-model", (cli_role_models or {}).get(role)),
        ("--model", cli_model),
        (role_env, env.get(role_env)),
        ("LOOPRUN_MODEL", env.get("LOOPRUN_MODEL")),
        (f"models.{role}{in_config}", config.models.get(role)),
        (f"models.default{in_config}", config.models.get("default")),
        (f"models.{role} in the template", (template_models or {}).get(role)),
        ("models.default in the template", (template_models or {}).get("default")),
    ]
    for source, ref in candidates:
        if ref and ref.strip() not in _NO_PREFERENCE:
            try:
                _split(ref.strip())
            except UsageError as exc:
                raise UsageError(f"{source}: {exc}") from None
            return ref.strip()
    role_option = "--model" if role == "act" else f"--{role}-model or --model"
    raise UsageError(
        f"no model for the {role} role: pass {role_option} (e.g. openai:gpt-4o-mini, "
        f"anthropic:claude-haiku-4-5, script:FILE), set {role_env} or LOOPRUN_MODEL, or "
        f"name one under models: in the config file ({config.source or config_path(env)}); "
        "the template's `default` means whichever of these is set"
    )
