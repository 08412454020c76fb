"""Models reached over HTTP (OpenAI-compatible servers, Anthropic): their clients built
from the settings, a hosted server without its key refused before any request. Apart
from the registry, so a run whose models are scripted or an agent CLI's never loads the
HTTP client (httpx)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from looprun.errors import ModelSetupError
from looprun.models import anthropic, openai
from looprun.models.base import Model
from looprun.models.config import Config, config_path
from looprun.models.http import EventSink, JsonClient, describe_server
from looprun.models.pricing import PriceTable
from looprun.system.proc import secret_values


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


def hosted_model(
    scheme: str,
    name: str,
    *,
    base_url: str | None = None,
    config: Config | None = None,
    on_event: EventSink | None = None,
    env: Mapping[str, str] | None = None,
    transport: httpx.BaseTransport | None = None,
    sleep: Callable[[float], None] | None = None,
) -> Model:
    """The ``openai`` or ``anthropic`` model ``name`` (see ``registry.resolve_model``)."""
    env = os.environ if env is None else env
    config = config or Config()
    prices = PriceTable(config.prices, output_limits=config.output_limits)
    extra: dict[str, Any] = {"on_event": on_event, "transport": transport}
    if sleep is not None:
        extra["sleep"] = sleep

    def _client(
        provider: str, name: str, url: str, headers: dict[str, str], key: str, key_env: str
    ) -> JsonClient:
        """One provider's client: the key and every secret in the environment masked."""
        return JsonClient(
            provider=provider,
            model=name,
            url=url,
            headers=headers,
            key_env=key_env,
            secrets=[key, *secret_values(env)],
            policy=config.retry,
            **extra,
        )

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
        client = _client(
            "openai", name, url.rstrip("/") + "/chat/completions", headers, key, key_env
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
    client = _client("anthropic", name, url.rstrip("/") + "/v1/messages", headers, key, key_env)
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
