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
from typing import Any

import httpx

from looprun.errors import ModelSetupError, UsageError
from looprun.models import anthropic, openai
from looprun.models.base import Model
from looprun.models.config import Config, config_path
from looprun.models.http import EventSink, JsonClient, describe_server
from looprun.models.pricing import PriceTable
from looprun.models.scripted import ScriptedModel
from looprun.system.proc import secret_values

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


def _is_local(url: str) -> bool:
    host = httpx.URL(url).host
    return host in ("localhost", "127.0.0.1", "::1") or host.endswith(".local")


def _no_key(
    scheme: str,
    name: str,
    url: str,
    key_env: str,
    config: Config,
    env: Mapping[str, str],
    also: str = "",
) -> ModelSetupError:
    """A hosted server without its key: a setup mistake (exit 2), named in one line with
    the variable to set and the config option that names another variable."""
    where = config.source or config_path(env)
    return ModelSetupError(
        f"{scheme} model {name!r} at {describe_server(url)}: no API key; set {key_env}, "
        f"or name the variable that holds it with api_key_env.{scheme} in the config file "
        f"({where}){also}"
    )


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
    env = os.environ if env is None else env
    config = config or Config()
    prices = PriceTable(config.prices, output_limits=config.output_limits)
    extra: dict[str, Any] = {"on_event": on_event, "transport": transport}
    if sleep is not None:
        extra["sleep"] = sleep
    if scheme == "openai":
        url = base_url or env.get("LOOPRUN_BASE_URL") or config.base_url or openai.DEFAULT_BASE_URL
        key_env = config.api_key_env.get("openai", openai.DEFAULT_KEY_ENV)
        key = env.get(key_env, "")
        if not key and url.rstrip("/") == openai.DEFAULT_BASE_URL:
            raise _no_key(
                "openai",
                name,
                url,
                key_env,
                config,
                env,
                also=", or point --base-url / LOOPRUN_BASE_URL at a local server",
            )
        headers = {"authorization": f"Bearer {key}"} if key else {}
        client = JsonClient(
            provider="openai",
            model=name,
            url=url.rstrip("/") + "/chat/completions",
            headers=headers,
            key_env=key_env,
            secrets=[key, *secret_values(env)],
            policy=config.retry,
            **extra,
        )
        official = httpx.URL(url).host == "api.openai.com"
        return openai.OpenAIModel(
            name,
            client,
            prices=prices,
            max_output_tokens=_smaller(config.max_output_tokens, prices.max_output(name)),
            output_tokens_field="max_completion_tokens" if official else "max_tokens",
        )
    url = env.get("ANTHROPIC_BASE_URL") or config.anthropic_base_url or anthropic.DEFAULT_BASE_URL
    key_env = config.api_key_env.get("anthropic", anthropic.DEFAULT_KEY_ENV)
    key = env.get(key_env, "")
    if not key and not _is_local(url):
        raise _no_key("anthropic", name, url, key_env, config, env)
    headers = {"anthropic-version": anthropic.API_VERSION}
    if key:
        headers["x-api-key"] = key
    client = JsonClient(
        provider="anthropic",
        model=name,
        url=url.rstrip("/") + "/v1/messages",
        headers=headers,
        key_env=key_env,
        secrets=[key, *secret_values(env)],
        policy=config.retry,
        **extra,
    )
    return anthropic.AnthropicModel(
        name,
        client,
        prices=prices,
        max_output_tokens=config.max_output_tokens,
        model_max_output=prices.max_output(name),
    )


def _smaller(a: int | None, b: int | None) -> int | None:
    """The tighter of two optional caps: the configured one and the model's own maximum."""
    return a if b is None else b if a is None else min(a, b)


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
