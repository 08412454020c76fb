"""``anthropic:<model>`` — the Messages API: a top-level ``system``, ``tool_use`` and
``tool_result`` content blocks, alternating user/assistant turns, ``stop_reason``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from looprun.models.base import Finish, Message, ToolSpec, Usage
from looprun.models.http import JsonClient
from looprun.models.pricing import PriceTable
from looprun.models.provider import Decoded, ProviderModel
from looprun.models.wire import decode_arguments, paired, token_count

DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_KEY_ENV = "ANTHROPIC_API_KEY"
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 8192
_EMPTY_RESULT = "(no output)"
_START = "(begin)"

_FINISH: dict[str, Finish] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "refusal",
    "pause_turn": "other",
}


def _blocks(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id,
            "content": message.content or _EMPTY_RESULT,
        }
        if message.is_error:
            block["is_error"] = True
        return [block]
    blocks: list[dict[str, Any]] = []
    if message.content.strip():  # the API refuses empty text blocks
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append(
            {
                "type": "tool_use",
                "id": call.id,
                "name": call.name,
                "input": dict(call.arguments) if call.arguments is not None else {},
            }
        )
    return blocks


def to_wire(messages: Sequence[Message]) -> tuple[str, list[dict[str, Any]]]:
    """(system text, messages) with consecutive same-role turns merged, as the API requires.

    Tool results travel in user turns and come first in them; the conversation starts
    with a user turn; a result is only ever sent right after the turn holding its call.
    """
    system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
    turns: list[dict[str, Any]] = []
    for m in paired([m for m in messages if m.role != "system"]):
        role = "assistant" if m.role == "assistant" else "user"
        blocks = _blocks(m)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:
        if turn["role"] == "user":  # tool_result blocks must lead a user turn
            turn["content"].sort(key=lambda b: b["type"] != "tool_result")
    if turns and turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": [{"type": "text", "text": _START}]})
    if not turns:
        turns.append({"role": "user", "content": [{"type": "text", "text": _START}]})
    return system, turns


def tools_to_wire(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
        for t in tools
    ]


def usage_from_wire(data: Any) -> Usage:
    """``input_tokens`` excludes cache reads and writes; the prompt is all three."""
    if not isinstance(data, dict):
        return Usage()
    read = token_count(data.get("cache_read_input_tokens"))
    write = token_count(data.get("cache_creation_input_tokens"))
    prompt = token_count(data.get("input_tokens")) + read + write
    return Usage(prompt, token_count(data.get("output_tokens")), read, write)


def reply_from_wire(data: dict[str, Any], model: str) -> Decoded:
    content = data.get("content")
    if not isinstance(content, list):
        raise ValueError("the response has no content list")
    texts: list[str] = []
    calls = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") == "tool_use":
            call_id = str(block.get("id") or f"toolu_{len(calls)}")
            calls.append(
                decode_arguments(call_id, str(block.get("name") or ""), block.get("input"))
            )
    detail = str(data.get("stop_reason") or "")
    finish: Finish = _FINISH.get(detail, "other") if detail else "stop"
    if calls and finish == "stop":
        finish = "tool_calls"
    message = Message("assistant", "\n\n".join(texts), tuple(calls))
    return (
        message,
        finish,
        detail,
        usage_from_wire(data.get("usage")),
        str(data.get("model") or model),
    )


class AnthropicModel(ProviderModel):
    """A Messages API client; ``complete`` never raises for a model's mistakes."""

    provider = "anthropic"

    def __init__(
        self,
        model: str,
        client: JsonClient,
        *,
        prices: PriceTable | None = None,
        max_output_tokens: int | None = None,
        temperature: float | None = None,
        model_max_output: int | None = None,
    ):
        super().__init__(model, client, prices=prices)
        self._max_tokens = max_output_tokens or DEFAULT_MAX_TOKENS
        if model_max_output:  # never more than the model itself can give
            self._max_tokens = min(self._max_tokens, model_max_output)
        self._temperature = temperature

    def request_body(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        max_output_tokens: int | None = None,
    ) -> dict:
        system, turns = to_wire(messages)
        limit = (
            self._max_tokens if not max_output_tokens else min(self._max_tokens, max_output_tokens)
        )
        body: dict[str, Any] = {"model": self.model, "max_tokens": max(1, limit)}
        if system:
            body["system"] = system
        body["messages"] = turns
        if tools:
            body["tools"] = tools_to_wire(tools)
        if self._temperature is not None:
            body["temperature"] = self._temperature
        return body

    def decode(self, data: dict[str, Any]) -> Decoded:
        return reply_from_wire(data, self.model)
