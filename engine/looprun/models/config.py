"""The user's config file: default models per role, servers, key variable names,
retry settings and extra prices.

Found at ``$LOOPRUN_CONFIG``, else ``$XDG_CONFIG_HOME/looprun/config.yaml`` (by default
``~/.config/looprun/config.yaml``); a missing file is an empty config. Precedence for
every setting: command line > environment > config file > template.

Example::

    models: {plan: "anthropic:claude-sonnet-4-5", act: "openai:gpt-4o-mini"}
    base_url: http://localhost:11434/v1      # openai-compatible server
    anthropic_base_url: https://api.anthropic.com
    api_key_env: {openai: OPENROUTER_API_KEY, anthropic: ANTHROPIC_API_KEY}
    retry: {max_attempts: 5, timeout_s: 120, backoff_max_s: 30, retry_after_max_s: 120}
    max_output_tokens: 8192                  # for every model
    output_limits: {"qwen2.5-coder:7b": 4096}   # a model's own maximum (beside the built-ins)
    prices: {"qwen2.5-coder:7b": {input: 0, output: 0}}
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from looprun.data.value import valueclass
from looprun.errors import UsageError
from looprun.models.pricing import Price
from looprun.models.retry import RetryPolicy

_EMPTY: Mapping[str, Any] = MappingProxyType({})
_KEYS = {
    "models", "base_url", "anthropic_base_url", "api_key_env", "retry",
    "max_output_tokens", "output_limits", "prices",
}  # fmt: skip
_RETRY_KEYS = {"max_attempts", "timeout_s", "backoff_base_s", "backoff_max_s", "retry_after_max_s"}
_PRICE_KEYS = {"input", "output", "cached_input", "cache_write"}


@valueclass
class Config:
    """The user's config file: model roles, endpoints, key variables, retries and prices."""

    models: Mapping[str, str] = field(default_factory=lambda: _EMPTY)  # role -> model ref
    base_url: str | None = None
    anthropic_base_url: str | None = None
    api_key_env: Mapping[str, str] = field(default_factory=lambda: _EMPTY)  # scheme -> var
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_output_tokens: int | None = None
    output_limits: Mapping[str, int] = field(default_factory=lambda: _EMPTY)  # model -> max
    prices: Mapping[str, Price] = field(default_factory=lambda: _EMPTY)
    source: str = ""  # the file it came from, for messages


def config_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("LOOPRUN_CONFIG"):
        return Path(env["LOOPRUN_CONFIG"]).expanduser()
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME", "~")) / ".config")
    return Path(base).expanduser() / "looprun" / "config.yaml"


def _where(path: Path, node: yaml.Node | None) -> str:
    if node is None:
        return str(path)
    return f"{path}:{node.start_mark.line + 1}:{node.start_mark.column + 1}"


def _node_for(root: yaml.Node | None, keys: tuple[str, ...]) -> yaml.Node | None:
    node = root
    for key in keys:
        if not isinstance(node, yaml.MappingNode):
            return node
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                node = v
                break
        else:
            return node
    return node


class _Reader:
    """Checks values and reports mistakes as file:line:col: key: problem."""

    def __init__(self, path: Path, root: yaml.Node | None):
        self.path = path
        self.root = root

    def fail(self, keys: tuple[str, ...], problem: str) -> UsageError:
        where = _where(self.path, _node_for(self.root, keys))
        return UsageError(f"{where}: {'.'.join(keys)}: {problem}")

    def mapping(self, value: Any, keys: tuple[str, ...], allowed: set[str] | None = None) -> dict:
        if not isinstance(value, dict):
            raise self.fail(keys, "expected a mapping")
        if allowed is not None:
            unknown = sorted(set(map(str, value)) - allowed)
            if unknown:
                raise self.fail(keys, f"unknown keys {unknown}; known: {sorted(allowed)}")
        return value

    def text(self, value: Any, keys: tuple[str, ...]) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(keys, "expected a non-empty string")
        return value.strip()

    def number(self, value: Any, keys: tuple[str, ...], *, integer: bool = False) -> float:
        ok = isinstance(value, int) if integer else isinstance(value, int | float)
        if isinstance(value, bool) or not ok or not math.isfinite(value) or value < 0:
            kind = "a non-negative integer" if integer else "a non-negative number"
            raise self.fail(keys, f"expected {kind}")
        return value


def parse_config(text: str, path: Path) -> Config:
    try:
        root = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise UsageError(f"{where}: the config file is not valid YAML: {problem}") from None
    r = _Reader(path, root)
    if data is None:
        return Config(source=str(path))
    top = r.mapping(data, (), _KEYS)
    models = {
        str(role): r.text(ref, ("models", str(role)))
        for role, ref in r.mapping(top.get("models", {}), ("models",)).items()
    }
    key_env = {
        str(scheme): r.text(name, ("api_key_env", str(scheme)))
        for scheme, name in r.mapping(
            top.get("api_key_env", {}), ("api_key_env",), {"openai", "anthropic"}
        ).items()
    }
    retry_raw = r.mapping(top.get("retry", {}), ("retry",), _RETRY_KEYS)
    retry_values = {
        k: r.number(v, ("retry", k), integer=k == "max_attempts") for k, v in retry_raw.items()
    }
    if retry_values.get("max_attempts", 1) < 1:
        raise r.fail(("retry", "max_attempts"), "must be at least 1")
    if retry_values.get("timeout_s", 1) <= 0:
        raise r.fail(("retry", "timeout_s"), "must be positive")
    prices: dict[str, Price] = {}
    for name, entry in r.mapping(top.get("prices", {}), ("prices",)).items():
        keys = ("prices", str(name))
        entry = r.mapping(entry, keys, _PRICE_KEYS)
        for needed in ("input", "output"):
            if needed not in entry:
                raise r.fail(keys, f"missing {needed!r} (USD per million tokens)")
        values = {k: float(r.number(v, (*keys, k))) for k, v in entry.items()}
        prices[str(name)] = Price(**values)
    max_out = top.get("max_output_tokens")
    if max_out is not None:
        max_out = int(r.number(max_out, ("max_output_tokens",), integer=True))
    output_limits: dict[str, int] = {}
    for name, value in r.mapping(top.get("output_limits", {}), ("output_limits",)).items():
        at = ("output_limits", str(name))
        output_limits[str(name)] = int(r.number(value, at, integer=True))
        if output_limits[str(name)] < 1:
            raise r.fail(at, "must be at least 1")
    return Config(
        models=MappingProxyType(models),
        base_url=r.text(top["base_url"], ("base_url",)) if "base_url" in top else None,
        anthropic_base_url=(
            r.text(top["anthropic_base_url"], ("anthropic_base_url",))
            if "anthropic_base_url" in top
            else None
        ),
        api_key_env=MappingProxyType(key_env),
        retry=RetryPolicy(**retry_values),  # type: ignore[arg-type]
        max_output_tokens=max_out or None,
        output_limits=MappingProxyType(output_limits),
        prices=MappingProxyType(prices),
        source=str(path),
    )


def load_config(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Config:
    """The config at ``path`` (or the default location); missing default file → empty."""
    explicit = path is not None or bool((os.environ if env is None else env).get("LOOPRUN_CONFIG"))
    p = Path(path).expanduser() if path is not None else config_path(env)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        if explicit:
            raise UsageError(f"{p}: config file not found") from None
        return Config()
    except OSError as exc:
        raise UsageError(f"{p}: cannot read the config file: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{p}: the config file is not UTF-8 text") from None
    return parse_config(text, p)
