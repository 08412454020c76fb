"""The Messages API client against a real loopback server: wire format, faults, retries."""

from __future__ import annotations

import pytest
from tests.support.fake_provider import (
    anthropic_error,
    anthropic_reply,
    anthropic_request_problems,
    stall,
    truncated_json,
)

from looprun.errors import ContextTooLong, ModelError
from looprun.models.base import Message, ToolCall, ToolSpec
from looprun.models.config import Config
from looprun.models.http import RetryPolicy
from looprun.models.registry import resolve_model

KEY = "sk-ant-test-LEAKCANARY-fedcba9876543210"
TOOLS = [ToolSpec("run", "Run a command", {"type": "object", "properties": {"command": {}}})]


def model_for(server, recorder=None, **retry):
    policy = RetryPolicy(**{"timeout_s": 5.0, "backoff_base_s": 0.01, **retry})
    return resolve_model(
        "anthropic:claude-haiku-4-5",
        config=Config(retry=policy),
        env={"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": server.url},
        on_event=recorder.event if recorder else None,
        sleep=recorder.sleep if recorder else None,
    )


def test_conversation_is_sent_as_the_api_requires(server) -> None:
    server.push(
        anthropic_reply(
            "Let me look.",
            tool_calls=[("run", {"command": "pytest -q"}), ("run", {"command": "git diff"})],
        ),
        anthropic_reply("Fixed."),
    )
    model = model_for(server)
    conversation = [
        Message("system", "You fix bugs."),
        Message("user", "Intent: fix invoice totals."),
        Message("user", "Task: make the suite pass."),  # two user messages: merged
    ]
    reply = model.complete(conversation, TOOLS)
    assert reply.finish == "tool_calls" and reply.finish_detail == "tool_use"
    assert reply.message.content == "Let me look."
    calls = reply.message.tool_calls
    assert [c.arguments for c in calls] == [{"command": "pytest -q"}, {"command": "git diff"}]
    results = [
        Message("tool", "1 failed", tool_call_id=calls[0].id, is_error=True),
        Message("tool", "", tool_call_id=calls[1].id),
        Message("user", "Keep the diff small."),  # a nudge right after the results
    ]
    assert (
        model.complete([*conversation, reply.message, *results], TOOLS).message.content == "Fixed."
    )

    for recorded in server.requests:
        assert recorded.path == "/v1/messages"
        assert anthropic_request_problems(recorded.json(), recorded.headers) == []
        assert recorded.headers["x-api-key"] == KEY
        assert recorded.headers["anthropic-version"] == "2023-06-01"
    body = server.requests[1].json()
    assert body["system"] == "You fix bugs."
    assert body["max_tokens"] > 0
    assert body["tools"] == [
        {
            "name": "run",
            "description": "Run a command",
            "input_schema": {"type": "object", "properties": {"command": {}}},
        }
    ]
    user, assistant, results_turn = body["messages"]
    assert [b["text"] for b in user["content"]] == [
        "Intent: fix invoice totals.",
        "Task: make the suite pass.",
    ]
    assert [b["type"] for b in assistant["content"]] == ["text", "tool_use", "tool_use"]
    assert [b["type"] for b in results_turn["content"]] == ["tool_result", "tool_result", "text"]
    first, second, nudge = results_turn["content"]
    assert first == {
        "type": "tool_result",
        "tool_use_id": calls[0].id,
        "content": "1 failed",
        "is_error": True,
    }
    assert "is_error" not in second and second["content"]  # empty output still says so
    assert nudge["text"] == "Keep the diff small."


def test_orphaned_results_are_never_sent_and_missing_results_are_filled(server) -> None:
    server.push(anthropic_reply("ok"))
    call = ToolCall("toolu_1", "run", {"command": "ls"})
    conversation = [
        Message("user", "start"),
        Message("tool", "stale", tool_call_id="toolu_gone"),  # its call was trimmed away
        Message("assistant", "", (call,)),  # and this call lost its result
        Message("user", "go on"),
    ]
    model_for(server).complete(conversation, TOOLS)
    body = server.requests[0].json()
    assert anthropic_request_problems(body) == []
    text = str(body)
    assert "toolu_gone" not in text and "stale" not in text
    answer = body["messages"][2]["content"][0]
    assert answer["tool_use_id"] == "toolu_1" and answer["is_error"] is True


def test_stop_reasons_usage_and_cache_cost(server) -> None:
    server.push(
        anthropic_reply("cut", stop_reason="max_tokens"),
        anthropic_reply("no", stop_reason="refusal"),
        anthropic_reply(
            "cheap",
            input_tokens=1_000_000,
            output_tokens=1_000_000,
            cache_read=1_000_000,
            cache_write=1_000_000,
        ),
    )
    model = model_for(server)
    assert (model.complete([Message("user", "x")], []).finish) == "length"
    assert model.complete([Message("user", "x")], []).finish == "refusal"
    priced = model.complete([Message("user", "x")], [])
    assert priced.usage.prompt_tokens == 3_000_000  # input + cache reads + cache writes
    assert priced.usage.cached_tokens == 1_000_000
    assert priced.usage.cache_write_tokens == 1_000_000
    # claude-haiku-4-5: input 1.00, cache read 0.10, cache write 1.25, output 5.00
    assert priced.cost_usd == pytest.approx(1.0 + 0.10 + 1.25 + 5.0)
    assert priced.model == "claude-haiku-4-5-20251001" and priced.cost_known


def test_overloaded_and_broken_answers_are_retried(server, recorder) -> None:
    server.push(
        anthropic_error(529, "overloaded_error", "Overloaded"),
        anthropic_error(429, "rate_limit_error", "rate limited", {"retry-after": "2"}),
        truncated_json(anthropic_reply("lost")),
        stall(3.0),
        anthropic_reply("done"),
    )
    reply = model_for(server, recorder, timeout_s=0.5).complete([Message("user", "x")], [])
    assert reply.message.content == "done"
    assert recorder.sleeps[1] == 2.0
    assert [e["attempt"] for e in recorder.events] == [1, 2, 3, 4]
    assert "Overloaded" in recorder.events[0]["reason"]


def test_x_should_retry_false_is_respected(server, recorder) -> None:
    server.push(anthropic_error(500, "api_error", "do not retry me", {"x-should-retry": "false"}))
    with pytest.raises(ModelError, match="do not retry me"):
        model_for(server, recorder).complete([Message("user", "x")], [])
    assert recorder.events == []


@pytest.mark.parametrize(
    ("answer", "expected", "words"),
    [
        (
            anthropic_error(
                400, "invalid_request_error", "prompt is too long: 207791 tokens > 200000 maximum"
            ),
            ContextTooLong,
            ["207791"],
        ),
        (
            anthropic_error(413, "request_too_large", "Request exceeds the maximum size"),
            ContextTooLong,
            ["maximum size"],
        ),
        (
            anthropic_error(401, "authentication_error", "invalid x-api-key"),
            ModelError,
            ["HTTP 401", "invalid x-api-key", "ANTHROPIC_API_KEY"],
        ),
        (
            anthropic_error(404, "not_found_error", "model: claude-nine"),
            ModelError,
            ["HTTP 404", "claude-nine"],
        ),
    ],
)
def test_non_retryable_errors(server, answer, expected, words) -> None:
    server.push(answer)
    with pytest.raises(expected) as info:
        model_for(server).complete([Message("user", "x")], [])
    assert type(info.value) is expected
    message = str(info.value)
    assert "anthropic model 'claude-haiku-4-5' at http://127.0.0.1:" in message
    for word in words:
        assert word in message
    assert KEY not in message


def test_key_never_leaks(server, recorder) -> None:
    server.push(
        anthropic_error(529, "overloaded_error", f"busy for {KEY}"),
        anthropic_error(401, "authentication_error", f"invalid x-api-key {KEY}"),
    )
    model = model_for(server, recorder)
    with pytest.raises(ModelError) as info:
        model.complete([Message("user", "x")], [])
    assert server.requests[0].headers["x-api-key"] == KEY
    for text in (str(info.value), repr(model), str(recorder.events)):
        assert KEY not in text


def test_no_key_is_refused_up_front() -> None:
    with pytest.raises(ModelError, match="no API key; set ANTHROPIC_API_KEY"):
        resolve_model("anthropic:claude-haiku-4-5", env={})
