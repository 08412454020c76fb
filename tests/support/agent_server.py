"""Streaming answers for the agent CLIs' loopback server: Anthropic Messages (SSE), the
OpenAI Responses API (SSE), OpenAI Chat Completions (SSE for opencode; whole answers for
Aider, which does not stream) and the Gemini API's streamGenerateContent (SSE), and a
scripted responder that plays one step per main-loop request.

The real CLIs stream; these turn one scripted step into the event sequence each wire
format defines, served by ``FakeProvider``. A CLI also sends side requests (a title, a
quota probe, a token count): those get a short text answer and do not consume a step.

    steps = [edit("invoice/totals.py", old, new), say("fixed")]
    with FakeProvider(AgentScript(steps)) as server: ...
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.support.fake_provider import Canned, Recorded, canned, openai_reply

_ids = itertools.count(1)


@dataclass(frozen=True)
class Step:
    """One model reply: some text and tool calls (name, input) in the CLI's own names."""

    text: str = ""
    calls: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    input_tokens: int = 120
    output_tokens: int = 30


def say(text: str, **usage: int) -> Step:
    return Step(text=text, **usage)


def call(name: str, args: Mapping[str, Any], text: str = "", **usage: int) -> Step:
    return Step(text=text, calls=((name, dict(args)),), **usage)


# --- Anthropic Messages, streaming ---------------------------------------------------------


def _sse(events: Sequence[tuple[str, Mapping[str, Any]]]) -> bytes:
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode(
        "utf-8"
    )


def anthropic_stream(step: Step, model: str) -> Canned:
    """The Messages API's SSE sequence for one reply: message_start, one start/delta/stop
    triple per content block, message_delta with the stop reason and usage, message_stop."""
    events: list[tuple[str, Mapping[str, Any]]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": f"msg_loop{next(_ids)}",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": step.input_tokens,
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": 0,
                        "output_tokens": 1,
                    },
                },
            },
        )
    ]
    index = 0
    if step.text:
        events += [
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                },
            ),
            ("ping", {"type": "ping"}),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "text_delta", "text": step.text},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]
        index += 1
    for name, args in step.calls:
        raw = json.dumps(args)
        half = len(raw) // 2  # the input arrives as partial JSON in pieces
        events.append(
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {
                        "type": "tool_use",
                        "id": f"toolu_loop{next(_ids)}",
                        "name": name,
                        "input": {},
                    },
                },
            )
        )
        for piece in (raw[:half], raw[half:]):
            events.append(
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    },
                )
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    events += [
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": "tool_use" if step.calls else "end_turn",
                    "stop_sequence": None,
                },
                "usage": {"output_tokens": step.output_tokens},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return Canned(200, _sse(events), {"content-type": "text/event-stream"})


# --- OpenAI Responses API, streaming -------------------------------------------------------


def responses_stream(step: Step, model: str) -> Canned:
    """The Responses API's SSE sequence for one reply: response.created, one
    output_item.added/done pair per item (text deltas for a message), response.completed
    with the usage."""
    rid = f"resp_loop{next(_ids)}"
    seq = itertools.count()
    base = {"id": rid, "object": "response", "created_at": 1_700_000_000, "model": model}
    events: list[tuple[str, Mapping[str, Any]]] = [
        (
            "response.created",
            {
                "type": "response.created",
                "sequence_number": next(seq),
                "response": {**base, "status": "in_progress", "output": []},
            },
        )
    ]
    output: list[dict[str, Any]] = []
    if step.text:
        item_id = f"msg_loop{next(_ids)}"
        done_item = {
            "type": "message",
            "id": item_id,
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": step.text, "annotations": []}],
        }
        events += [
            (
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "sequence_number": next(seq),
                    "output_index": len(output),
                    "item": {**done_item, "status": "in_progress", "content": []},
                },
            ),
            (
                "response.output_text.delta",
                {
                    "type": "response.output_text.delta",
                    "sequence_number": next(seq),
                    "item_id": item_id,
                    "output_index": len(output),
                    "content_index": 0,
                    "delta": step.text,
                },
            ),
            (
                "response.output_item.done",
                {
                    "type": "response.output_item.done",
                    "sequence_number": next(seq),
                    "output_index": len(output),
                    "item": done_item,
                },
            ),
        ]
        output.append(done_item)
    for name, args in step.calls:
        item = {
            "type": "function_call",
            "id": f"fc_loop{next(_ids)}",
            "call_id": f"call_loop{next(_ids)}",
            "name": name,
            "arguments": json.dumps(args),
            "status": "completed",
        }
        events += [
            (
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "sequence_number": next(seq),
                    "output_index": len(output),
                    "item": {**item, "arguments": "", "status": "in_progress"},
                },
            ),
            (
                "response.output_item.done",
                {
                    "type": "response.output_item.done",
                    "sequence_number": next(seq),
                    "output_index": len(output),
                    "item": item,
                },
            ),
        ]
        output.append(item)
    usage = {
        "input_tokens": step.input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": step.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": step.input_tokens + step.output_tokens,
    }
    events.append(
        (
            "response.completed",
            {
                "type": "response.completed",
                "sequence_number": next(seq),
                "response": {**base, "status": "completed", "output": output, "usage": usage},
            },
        )
    )
    return Canned(200, _sse(events), {"content-type": "text/event-stream"})


# --- OpenAI Chat Completions, streaming ---------------------------------------------------


def _data_sse(chunks: Sequence[Mapping[str, Any]], done: bool) -> bytes:
    text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
    return (text + ("data: [DONE]\n\n" if done else "")).encode("utf-8")


def chat_stream(step: Step, model: str) -> Canned:
    """Chat Completions' SSE chunks for one reply: the role, the text as a delta, each tool
    call (id and name first, then its arguments in two pieces), the finish reason, then the
    usage chunk with no choices (``stream_options.include_usage``) and ``[DONE]``."""
    cid = f"chatcmpl-loop{next(_ids)}"
    base = {"id": cid, "object": "chat.completion.chunk", "created": 1_700_000_000, "model": model}

    def chunk(delta: Mapping[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    if step.text:
        chunks.append(chunk({"content": step.text}))
    for i, (name, args) in enumerate(step.calls):
        raw = json.dumps(args)
        half = len(raw) // 2
        head = {"index": i, "id": f"call_loop{next(_ids)}", "type": "function"}
        first = {**head, "function": {"name": name, "arguments": ""}}
        chunks.append(chunk({"tool_calls": [first]}))
        for piece in (raw[:half], raw[half:]):
            chunks.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
    chunks.append(chunk({}, "tool_calls" if step.calls else "stop"))
    usage = {
        "prompt_tokens": step.input_tokens,
        "completion_tokens": step.output_tokens,
        "total_tokens": step.input_tokens + step.output_tokens,
    }
    chunks.append({**base, "choices": [], "usage": usage})
    return Canned(200, _data_sse(chunks, done=True), {"content-type": "text/event-stream"})


# --- Gemini API, streamGenerateContent?alt=sse ---------------------------------------------


def gemini_stream(step: Step, model: str) -> Canned:
    """The Gemini API's SSE for one reply: GenerateContentResponse chunks, the text first,
    then the function calls (whole, as the API sends them), the last with the finish reason
    and the usage metadata."""
    rid = f"loop{next(_ids)}"
    usage = {
        "promptTokenCount": step.input_tokens,
        "candidatesTokenCount": step.output_tokens,
        "totalTokenCount": step.input_tokens + step.output_tokens,
    }
    parts: list[dict[str, Any]] = []
    if step.text:
        parts.append({"text": step.text})
    parts += [{"functionCall": {"name": name, "args": dict(args)}} for name, args in step.calls]
    chunks = []
    for i, part in enumerate(parts or [{"text": ""}]):
        last = i == max(len(parts), 1) - 1
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": [part]}, "index": 0}
        body: dict[str, Any] = {"candidates": [candidate], "modelVersion": model, "responseId": rid}
        if last:
            candidate["finishReason"] = "STOP"
            body["usageMetadata"] = usage
        chunks.append(body)
    return Canned(200, _data_sse(chunks, done=False), {"content-type": "text/event-stream"})


def gemini_json(step: Step, model: str) -> Canned:
    """A non-streamed generateContent answer (Gemini CLI's side requests use it)."""
    parts: list[dict[str, Any]] = [{"text": step.text}] if step.text else []
    parts += [{"functionCall": {"name": name, "args": dict(args)}} for name, args in step.calls]
    usage = {
        "promptTokenCount": step.input_tokens,
        "candidatesTokenCount": step.output_tokens,
        "totalTokenCount": step.input_tokens + step.output_tokens,
    }
    body = {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": usage,
        "modelVersion": model,
    }
    return canned(200, body)


# --- the responder -------------------------------------------------------------------------


def _is_main(path: str, body: Mapping[str, Any]) -> bool:
    """A main-loop request carries the tools (side requests for titles or probes do not)."""
    if "count_tokens" in path or ":countTokens" in path:
        return False
    if path.rstrip("/").endswith("/chat/completions") and not body.get("stream"):
        return True  # Aider: its edits are in the text, it sends no tools and no stream
    return bool(body.get("tools"))


@dataclass
class AgentScript:
    """Plays ``steps`` in order to the CLI's main-loop requests; once they run out every
    further main request gets ``then`` (a plain closing text by default)."""

    steps: Sequence[Step]
    then: Step = Step(text="Done.")
    model: str = "claude-sonnet-4-5-20250929"
    main: list[Recorded] = field(default_factory=list)
    side: list[Recorded] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: Recorded) -> Canned:
        try:
            body = request.json() if request.body else {}
        except ValueError:
            body = {}
        if "count_tokens" in request.path:
            return canned(200, {"input_tokens": 100})
        if ":countTokens" in request.path:
            return canned(200, {"totalTokens": 100})
        main = _is_main(request.path, body)
        with self._lock:
            if main:
                self.main.append(request)
                n = len(self.main) - 1
                step = self.steps[n] if n < len(self.steps) else self.then
            else:
                self.side.append(request)
                step = Step(text="ok", input_tokens=10, output_tokens=2)
        model = str(body.get("model") or self.model)
        path = request.path.split("?", 1)[0].rstrip("/")
        if ":streamGenerateContent" in path:  # Gemini: the model is in the path
            return gemini_stream(step, path.rsplit("/", 1)[-1].split(":", 1)[0])
        if ":generateContent" in path:
            return gemini_json(step, path.rsplit("/", 1)[-1].split(":", 1)[0])
        if path.endswith("/chat/completions") and not body.get("stream"):
            return openai_reply(
                step.text,
                prompt_tokens=step.input_tokens,
                completion_tokens=step.output_tokens,
                model=model,
            )
        if path.endswith("/responses"):
            return responses_stream(step, model)
        if path.endswith("/chat/completions"):
            return chat_stream(step, model)
        if body.get("stream"):
            return anthropic_stream(step, model)
        return _anthropic_json(step, model)


def _anthropic_json(step: Step, model: str) -> Canned:
    content: list[dict[str, Any]] = []
    if step.text:
        content.append({"type": "text", "text": step.text})
    for name, args in step.calls:
        content.append(
            {"type": "tool_use", "id": f"toolu_loop{next(_ids)}", "name": name, "input": args}
        )
    return canned(
        200,
        {
            "id": f"msg_loop{next(_ids)}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": "tool_use" if step.calls else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": step.input_tokens, "output_tokens": step.output_tokens},
        },
    )
