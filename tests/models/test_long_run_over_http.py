"""A 100-iteration simulated run through the real clients and a loopback server: every
request stays within budget_tokens: 8000, is valid for the provider, and keeps the
intent and the latest failure; a context-length refusal trims once and carries on."""

from __future__ import annotations

import itertools

import pytest
from tests.support.fake_provider import (
    Canned,
    FakeProvider,
    Recorded,
    anthropic_error,
    anthropic_reply,
    anthropic_request_problems,
    openai_error,
    openai_reply,
    openai_request_problems,
)

from looprun.loop.context import ContextBudget, complete_in_budget
from looprun.models.base import Message, ToolSpec
from looprun.models.config import Config
from looprun.models.http import RetryPolicy
from looprun.models.registry import resolve_model

INTENT = "Intent: division by zero in invoice totals"
TOOLS = [ToolSpec("run", "Run a command", {"type": "object", "properties": {"command": {}}})]


def responder(provider: str) -> object:
    counter = itertools.count(1)

    def answer(request: Recorded) -> Canned:
        n = next(counter)
        prompt = len(request.body) // 4  # what a provider would roughly count
        call = [("run", {"command": f"python -m pytest -q -k case{n}"})]
        if provider == "openai":
            return openai_reply(f"step {n}", tool_calls=call, prompt_tokens=prompt)
        return anthropic_reply(f"step {n}", tool_calls=call, input_tokens=prompt)

    return answer


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_hundred_iterations_within_budget(provider: str) -> None:
    with FakeProvider() as server:
        server.responder = responder(provider)  # type: ignore[assignment]
        config = Config(retry=RetryPolicy(timeout_s=5, backoff_base_s=0.01))
        env = {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "sk-ant-xxxxxxxx"}
        model = resolve_model(
            f"{provider}:test-model", base_url=server.openai_url, config=config, env=env
        )
        budget = ContextBudget(8000, recent_rounds=3)
        rounds: list[list[Message]] = []
        events: list[dict] = []
        for iteration in range(1, 101):
            if iteration == 60:  # the provider's tokenizer disagrees once
                server.push(
                    openai_error(400, "maximum context length is 8000 tokens", code=None)
                    if provider == "openai"
                    else anthropic_error(400, "invalid_request_error", "prompt is too long")
                )
            failure = f"LATEST FAILURE #{iteration}: test_total: expected 42, got 41"
            trace = "\n".join(f'  File "src/invoice.py", line {i}' for i in range(iteration * 5))
            summary = "\n".join(
                f"iter {i}: edited invoice.py; sig=ZeroDiv" for i in range(iteration)
            )
            pinned = [
                Message("system", "You fix bugs with the tools you are given."),
                Message("user", f"{INTENT}\n\n{failure}\n{trace}\n\nEarlier:\n{summary}"),
            ]
            reply, sent, budget = complete_in_budget(
                model, budget, pinned, rounds, TOOLS, on_event=events.append
            )
            assert budget.estimate(sent) <= budget.budget_tokens <= 8000
            body = server.requests[-1].json()
            if provider == "openai":
                assert openai_request_problems(body) == []
            else:
                assert anthropic_request_problems(body, server.requests[-1].headers) == []
            assert INTENT in str(body) and failure in str(body)
            call = reply.message.tool_calls[0]
            output = f"case {iteration} output\n" * (50 if iteration % 2 else 2000)
            rounds.append([reply.message, Message("tool", output, tool_call_id=call.id)])
        assert [e["event"] for e in events] == ["context_trimmed"]
        assert events[0]["to_tokens"] == 4000
        assert len(server.requests) == 101
