"""Helpers both wire formats share: keeping tool calls and results paired, decoding
tool-call arguments the model wrote as JSON text, and reading token counts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from looprun.models.base import Message, ToolCall

NOT_CARRIED_OUT = "(no result: this tool call was not carried out)"


def paired(messages: Sequence[Message]) -> list[Message]:
    """Messages in which every tool result directly answers a call of the assistant
    message before it, and every call has a result.

    Providers reject a result without its call and a call without its result; the
    context budget already guarantees both, so this only repairs a caller's slip:
    orphaned results are dropped, missing results are answered with an error.
    """
    out: list[Message] = []
    open_calls: dict[str, None] = {}  # ids of the last assistant message, in order

    def close() -> None:
        for call_id in open_calls:
            out.append(Message("tool", NOT_CARRIED_OUT, tool_call_id=call_id, is_error=True))
        open_calls.clear()

    for message in messages:
        if message.role == "tool":
            if message.tool_call_id in open_calls:
                del open_calls[message.tool_call_id]
                out.append(message)
            continue
        close()
        out.append(message)
        if message.role == "assistant":
            open_calls = dict.fromkeys(c.id for c in message.tool_calls)
    close()
    return out


def decode_arguments(call_id: str, name: str, raw: Any) -> ToolCall:
    """A ToolCall from arguments as sent: a JSON object text (OpenAI) or an object.

    Arguments that are not a JSON object give ``arguments=None`` and an ``error`` the
    engine returns to the model as a tool error, so the model can correct itself.
    """
    if isinstance(raw, dict):
        return ToolCall(call_id, name, raw, json.dumps(raw, ensure_ascii=False))
    text = "" if raw is None else str(raw)
    if not text.strip():
        return ToolCall(call_id, name, {}, text)  # some servers send "" for no arguments
    try:
        value = json.loads(text)
    except ValueError as exc:
        return ToolCall(
            call_id,
            name,
            None,
            text,
            error=f"the arguments are not valid JSON ({exc.msg} at "
            f"position {exc.pos}); send a JSON object matching the tool's schema",
        )
    if not isinstance(value, dict):
        return ToolCall(
            call_id,
            name,
            None,
            text,
            error=f"the arguments must be a JSON object, not {type(value).__name__}",
        )
    return ToolCall(call_id, name, value, text)


def encode_arguments(call: ToolCall) -> str:
    """The arguments as JSON text for sending a past call back to the model.

    Invalid arguments go back as ``{}``: some compatible servers parse this field and
    would reject the whole request; the tool error the call got says what was wrong.
    """
    if call.arguments is None:
        return "{}"
    if call.raw_arguments:
        return call.raw_arguments
    return json.dumps(call.arguments, ensure_ascii=False)


def token_count(value: Any) -> int:
    """A token count from a usage block; anything but a non-negative integer counts 0."""
    return value if isinstance(value, int) and value >= 0 else 0
