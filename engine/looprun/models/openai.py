"""``openai:<model>`` — the Chat Completions API, for OpenAI and every compatible server
(Ollama, vLLM, llama.cpp server, LM Studio, OpenRouter, Groq, DeepSeek, ...)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from looprun.models.base import Finish, Message, ToolSpec, Usage
from looprun.models.http import JsonClient
from looprun.models.pricing import PriceTable
from looprun.models.provider import Decoded, ProviderModel
from looprun.models.wire import decode_arguments, encode_arguments, paired, token_count

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
ERROR_PREFIX = "ERROR: "  # the format has no error flag on tool messages; say it in words

_FINISH: dict[str, Finish] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "content_filter",
}


def to_wire(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Provider-neutral messages as Chat Completions messages."""
    out: list[dict[str, Any]] = []
    for m in paired(messages):
        if m.role == "tool":
            content = m.content
            if m.is_error and not content.startswith(ERROR_PREFIX):
                content = ERROR_PREFIX + content
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": content})
        elif m.role == "assistant" and m.tool_calls:
            out.append(
                {
                    "role": "assistant",
                    "content": m.content or None,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": encode_arguments(c)},
                        }
                        for c in m.tool_calls
                    ],
                }
            )
        else:
            out.append({"role": m.role, "content": m.content})
    return out


def tools_to_wire(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": dict(t.parameters),
            },
        }
        for t in tools
    ]


def usage_from_wire(data: Any) -> Usage:
    if not isinstance(data, dict):
        return Usage()
    details = data.get("prompt_tokens_details")
    cached = token_count(details.get("cached_tokens")) if isinstance(details, dict) else 0
    return Usage(
        token_count(data.get("prompt_tokens")), token_count(data.get("completion_tokens")), cached
    )


def reply_from_wire(data: dict[str, Any], model: str) -> Decoded:
    """(message, finish, provider's finish reason, usage, model as reported)."""
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ValueError("the response has no choices")
    choice = choices[0]
    wire = choice.get("message")
    if not isinstance(wire, dict):
        raise ValueError("the first choice has no message")
    calls = []
    for index, raw in enumerate(wire.get("tool_calls") or []):
        if not isinstance(raw, dict):
            continue
        function = raw.get("function") if isinstance(raw.get("function"), dict) else {}
        call_id = str(raw.get("id") or f"call_{index}")  # some local servers send none
        calls.append(
            decode_arguments(call_id, str(function.get("name") or ""), function.get("arguments"))
        )
    text = wire.get("content")
    text = text if isinstance(text, str) else ""
    detail = str(choice.get("finish_reason") or "")
    finish: Finish = _FINISH.get(detail, "other") if detail else "stop"
    refusal = wire.get("refusal")
    if isinstance(refusal, str) and refusal:
        finish, text = "refusal", text or refusal
    elif calls and finish in ("stop", "other"):
        finish = "tool_calls"  # several local servers say "stop" alongside tool calls
    message = Message("assistant", text, tuple(calls))
    reported = data.get("model")
    return message, finish, detail, usage_from_wire(data.get("usage")), str(reported or model)


class OpenAIModel(ProviderModel):
    """A Chat Completions client; ``complete`` never raises for a model's mistakes."""

    provider = "openai"

    def __init__(
        self,
        model: str,
        client: JsonClient,
        *,
        prices: PriceTable | None = None,
        max_output_tokens: int | None = None,
        temperature: float | None = None,
        output_tokens_field: str = "max_completion_tokens",
    ):
        super().__init__(model, client, prices=prices)
        self._max_output_tokens = max_output_tokens
        self._temperature = temperature
        self._output_tokens_field = output_tokens_field

    def request_body(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        max_output_tokens: int | None = None,
    ) -> dict:
        body: dict[str, Any] = {"model": self.model, "messages": to_wire(messages)}
        if tools:
            body["tools"] = tools_to_wire(tools)
        limit = _smaller(self._max_output_tokens, max_output_tokens)
        if limit:
            body[self._output_tokens_field] = limit
        if self._temperature is not None:
            body["temperature"] = self._temperature
        return body

    def decode(self, data: dict[str, Any]) -> Decoded:
        return reply_from_wire(data, self.model)


def _smaller(a: int | None, b: int | None) -> int | None:
    """The tighter of two optional output limits."""
    if a is None or b is None:
        return a if b is None else b
    return min(a, b)
