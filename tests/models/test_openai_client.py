"""The Chat Completions client against a real loopback server: wire format, faults, retries."""

from __future__ import annotations

import time

import pytest
from tests.support.fake_provider import (
    dropped_connection,
    error,
    openai_error,
    openai_reply,
    openai_request_problems,
    stall,
    truncated_json,
)

from looprun.errors import ContextTooLong, ModelError
from looprun.models.base import Message, ToolSpec
from looprun.models.config import Config
from looprun.models.http import RetryPolicy
from looprun.models.registry import resolve_model

KEY = "sk-test-LEAKCANARY-0123456789abcdef"
TOOLS = [
    ToolSpec("read_file", "Read a file", {"type": "object", "properties": {"path": {}}}),
    ToolSpec("run", "Run a command", {"type": "object", "properties": {"command": {}}}),
]
START = [Message("system", "You fix bugs."), Message("user", "Fix invoice totals.")]


def model_for(server, recorder=None, **retry):
    policy = RetryPolicy(**{"timeout_s": 5.0, "backoff_base_s": 0.01, **retry})
    return resolve_model(
        "openai:gpt-4o-mini",
        base_url=server.openai_url,
        config=Config(retry=policy),
        env={"OPENAI_API_KEY": KEY},
        on_event=recorder.event if recorder else None,
        sleep=recorder.sleep if recorder else None,
    )


def test_several_tool_calls_invalid_arguments_and_unknown_tool(server) -> None:
    server.push(
        openai_reply(
            None,
            tool_calls=[
                ("read_file", {"path": "src/invoice.py"}),
                ("run", '{"command": "pytest -q'),  # cut off: not valid JSON
                ("launch_missiles", {"target": "moon"}),  # a tool nobody offered
                ("run", "[1, 2]"),  # JSON, but not an object
            ],
        ),
        openai_reply("All done."),
    )
    model = model_for(server)
    reply = model.complete(START, TOOLS)
    assert reply.finish == "tool_calls"
    assert reply.message.content == ""  # content: null with tool calls
    calls = reply.message.tool_calls
    assert [c.name for c in calls] == ["read_file", "run", "launch_missiles", "run"]
    assert calls[0].arguments == {"path": "src/invoice.py"} and calls[0].error is None
    assert calls[1].arguments is None and "not valid JSON" in (calls[1].error or "")
    assert calls[1].raw_arguments == '{"command": "pytest -q'
    assert calls[2].arguments == {"target": "moon"}  # the engine answers it with a tool error
    assert calls[3].arguments is None and "JSON object" in (calls[3].error or "")
    assert len({c.id for c in calls}) == 4

    # The engine answers every call (errors included) and asks again.
    results = [
        Message("tool", "def total(): ...", tool_call_id=calls[0].id),
        Message("tool", calls[1].error or "", tool_call_id=calls[1].id, is_error=True),
        Message("tool", "unknown tool", tool_call_id=calls[2].id, is_error=True),
        Message("tool", calls[3].error or "", tool_call_id=calls[3].id, is_error=True),
    ]
    second = model.complete([*START, reply.message, *results], TOOLS)
    assert second.finish == "stop" and second.message.content == "All done."

    first_request, second_request = (r.json() for r in server.requests)
    assert openai_request_problems(first_request) == []
    assert openai_request_problems(second_request) == []
    assert server.requests[0].path == "/v1/chat/completions"
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert first_request["model"] == "gpt-4o-mini"
    assert first_request["tools"][0] == {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {}}},
        },
    }
    sent = second_request["messages"]
    assert [m["role"] for m in sent] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "tool",
        "tool",
    ]
    assert sent[2]["content"] is None
    assert [c["id"] for c in sent[2]["tool_calls"]] == [m["tool_call_id"] for m in sent[3:]]
    assert sent[4]["content"].startswith("ERROR: ")  # no error flag in this format
    assert sent[2]["tool_calls"][1]["function"]["arguments"] == "{}"  # invalid JSON not resent


def test_finish_reasons_refusal_usage_and_cost(server) -> None:
    server.push(
        openai_reply("partial answer", finish="length", prompt_tokens=1000, completion_tokens=500),
        openai_reply(None, refusal="I can't help with that."),
        openai_reply("filtered", finish="content_filter"),
        openai_reply(
            "cached", prompt_tokens=2_000_000, completion_tokens=1_000_000, cached_tokens=1_000_000
        ),
        openai_reply(None, tool_calls=[("run", {"command": "ls"})], finish="stop"),
    )
    model = model_for(server)
    truncated = model.complete(START, TOOLS)
    assert (truncated.finish, truncated.finish_detail) == ("length", "length")
    assert truncated.usage.prompt_tokens == 1000 and truncated.usage.completion_tokens == 500
    refused = model.complete(START, TOOLS)
    assert refused.finish == "refusal" and refused.message.content == "I can't help with that."
    assert model.complete(START, TOOLS).finish == "content_filter"
    priced = model.complete(START, TOOLS)
    assert priced.usage.cached_tokens == 1_000_000
    assert priced.model == "gpt-4o-mini-2024-07-18" and priced.cost_known
    # gpt-4o-mini: 1M plain input 0.15 + 1M cached 0.075 + 1M output 0.60
    assert priced.cost_usd == pytest.approx(0.15 + 0.075 + 0.60)
    # A local server answering "stop" together with tool calls still means tool calls.
    assert model.complete(START, TOOLS).finish == "tool_calls"


def test_retries_429_honouring_retry_after_then_succeeds(server, recorder) -> None:
    server.push(
        openai_error(
            429,
            "Rate limit reached",
            "requests",
            "rate_limit_exceeded",
            headers={"Retry-After": "7"},
        ),
        error(
            429,
            {
                "error": {
                    "code": 429,
                    "message": "Provider returned error",
                    "metadata": {"raw": "upstream busy"},
                }
            },
            {"retry-after-ms": "250"},
        ),
        openai_reply("ok"),
    )
    reply = model_for(server, recorder).complete(START, TOOLS)
    assert reply.message.content == "ok"
    assert recorder.sleeps == [7.0, 0.25]
    assert [e["attempt"] for e in recorder.events] == [1, 2]
    assert recorder.events[0]["event"] == "model_retry"
    assert "Rate limit reached" in recorder.events[0]["reason"]
    assert "upstream busy" in recorder.events[1]["reason"]
    assert len(server.requests) == 3


def test_server_errors_timeouts_and_broken_bodies_are_retried(server, recorder) -> None:
    server.push(
        error(500, "Internal Server Error", {"content-type": "text/plain"}),
        stall(3.0),  # longer than the request timeout below
        truncated_json(openai_reply("lost")),
        dropped_connection(openai_reply("lost too")),
        error(503, {"error": {"message": "overloaded"}}),
        openai_reply("finally"),
    )
    started = time.monotonic()
    reply = model_for(server, recorder, timeout_s=0.5, max_attempts=6).complete(START, TOOLS)
    assert reply.message.content == "finally"
    assert time.monotonic() - started < 2.5
    reasons = [e["reason"] for e in recorder.events]
    assert "HTTP 500" in reasons[0]
    assert "timeout" in reasons[1]
    assert "invalid JSON" in reasons[2]
    assert "connection failed" in reasons[3]
    assert "overloaded" in reasons[4]
    # Exponential backoff with jitter: each wait within its step's upper half.
    for attempt, delay in enumerate(recorder.sleeps, start=1):
        step = min(30.0, 0.01 * 2 ** (attempt - 1))
        assert step / 2 <= delay <= step


def test_gives_up_after_max_attempts(server, recorder) -> None:
    server.push(*[error(502, "bad gateway", {"content-type": "text/plain"})] * 3)
    with pytest.raises(ModelError, match=r"gave up after 3 attempts; last: HTTP 502"):
        model_for(server, recorder, max_attempts=3).complete(START, TOOLS)
    assert len(server.requests) == 3 and len(recorder.events) == 2


def test_retry_after_beyond_the_cap_stops_with_advice(server, recorder) -> None:
    server.push(openai_error(429, "quota", headers={"Retry-After": "3600"}))
    with pytest.raises(ModelError, match=r"asks to wait 3600 s"):
        model_for(server, recorder).complete(START, TOOLS)
    assert recorder.sleeps == []


def test_run_deadline_bounds_a_stalled_call(server) -> None:
    server.push(stall(5.0), stall(5.0))
    started = time.monotonic()
    with pytest.raises(ModelError, match="timeout"):
        model_for(server).complete(START, TOOLS, timeout_s=0.6)
    assert time.monotonic() - started < 2.0


@pytest.mark.parametrize(
    ("answer", "expected", "words"),
    [
        (
            openai_error(
                401,
                "Incorrect API key provided: sk-test-***cdef.",
                "invalid_request_error",
                "invalid_api_key",
            ),
            ModelError,
            ["HTTP 401", "Incorrect API key", "OPENAI_API_KEY"],
        ),
        (
            openai_error(403, "You are not allowed to sample from this model"),
            ModelError,
            ["HTTP 403", "not allowed"],
        ),
        (
            openai_error(
                404,
                "The model `gpt-9` does not exist or you do not have access to it.",
                code="model_not_found",
            ),
            ModelError,
            ["HTTP 404", "does not exist", "check the model name"],
        ),
        (
            openai_error(
                400,
                "This model's maximum context length is 128000 tokens. However, "
                "your messages resulted in 130000 tokens.",
                code="context_length_exceeded",
            ),
            ContextTooLong,
            ["too long", "128000"],
        ),
        (
            error(
                400,
                {
                    "object": "error",
                    "message": "This model's maximum context length is "
                    "8192 tokens. However, you requested 9000 tokens.",
                    "type": "BadRequestError",
                },
            ),
            ContextTooLong,
            ["8192"],
        ),
        (error(400, {"error": "model 'qwen9' not found"}), ModelError, ["qwen9", "HTTP 400"]),
    ],
)
def test_non_retryable_errors_say_what_to_do(server, recorder, answer, expected, words) -> None:
    server.push(answer)
    with pytest.raises(expected) as info:
        model_for(server, recorder).complete(START, TOOLS)
    message = str(info.value)
    assert type(info.value) is expected
    assert "openai model 'gpt-4o-mini' at http://127.0.0.1:" in message
    for word in words:
        assert word in message
    assert len(server.requests) == 1 and recorder.events == []
    assert KEY not in message and "Traceback" not in message


def test_api_key_never_leaks(server, recorder) -> None:
    echo = f"Incorrect API key provided: {KEY}"  # a server that echoes the key back
    server.push(
        openai_error(429, f"slow down {KEY}", headers={"Retry-After": "0"}),
        openai_error(401, echo),
    )
    model = model_for(server, recorder)
    with pytest.raises(ModelError) as info:
        model.complete(START, TOOLS)
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"  # it was sent
    seen = [
        str(info.value),
        repr(info.value),
        repr(model),
        str(recorder.events),
        repr(info.value.args),
    ]
    seen.append(repr(getattr(model, "_client", "")))
    for text in seen:
        assert KEY not in text
    assert "***" in str(info.value)


def test_no_key_for_the_hosted_api_is_refused_before_any_request() -> None:
    with pytest.raises(ModelError, match="no API key; set OPENAI_API_KEY"):
        resolve_model("openai:gpt-4o-mini", env={})


def test_local_server_needs_no_key(server) -> None:
    server.push(openai_reply("hi", model="llama3.2"))
    model = resolve_model("openai:llama3.2", base_url=server.openai_url, env={})
    reply = model.complete(START, [])
    assert reply.message.content == "hi"
    assert "authorization" not in server.requests[0].headers
    assert "tools" not in server.requests[0].json()
    assert reply.cost_usd == 0 and reply.cost_known is False  # no price for a local model
