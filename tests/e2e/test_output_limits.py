"""Requested output tokens are capped by the model's own maximum (the table beside the
prices, extended by the config file), not only by the run's remaining token budget: the
real CLI fixes samples/invoice against the loopback provider server, and every request it
sends is read."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_http_providers import InvoiceFix, run
from tests.support.fake_provider import FakeProvider

from looprun.models.pricing import BUILTIN_OUTPUT_LIMITS


@pytest.fixture
def server() -> Iterator[FakeProvider]:
    with FakeProvider() as running:
        yield running


def _asked(server: FakeProvider, field: str) -> list[int]:
    return [r.json()[field] for r in server.requests]


@pytest.mark.parametrize(
    ("provider", "model", "field"),
    [
        ("openai", "gpt-4o-mini", "max_tokens"),
        ("anthropic", "claude-3-5-haiku-20241022", "max_tokens"),
    ],
)
def test_requests_never_ask_more_than_the_model_can_give(
    provider: str, model: str, field: str, server: FakeProvider, tmp_path: Path
) -> None:
    server.responder = InvoiceFix(provider)
    # bugfix's token budget is 400,000: far above either model's output maximum
    config = {"max_output_tokens": 100_000} if provider == "anthropic" else None
    proc, _ = run(server, tmp_path, model=f"{provider}:{model}", config=config)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["outcome"] == "done"
    asked = _asked(server, field)
    base = model.removesuffix("-20241022")
    assert asked and set(asked) == {BUILTIN_OUTPUT_LIMITS[base]}, asked


def test_the_config_file_gives_a_local_model_its_maximum(
    server: FakeProvider, tmp_path: Path
) -> None:
    server.responder = InvoiceFix("openai")
    config = {"output_limits": {"qwen2.5-coder:7b": 2048}}
    proc, _ = run(server, tmp_path, model="openai:qwen2.5-coder:7b", config=config)
    assert proc.returncode == 0, proc.stderr
    assert set(_asked(server, "max_tokens")) == {2048}
