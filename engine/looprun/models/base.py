"""The protocol between the loop and a model, and the provider-neutral message shapes.

Providers (OpenAI-compatible, Anthropic, scripted) translate these to and from their
wire formats; the loop never sees HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import field
from functools import cached_property
from typing import Any, Literal, Protocol, runtime_checkable

from looprun.data.value import valueclass

Role = Literal["system", "user", "assistant", "tool"]
# Why a model turn ended, normalised across providers.
Finish = Literal["stop", "tool_calls", "length", "refusal", "content_filter", "other"]


@valueclass
class ToolSpec:
    """A tool offered to the model: name, description, JSON Schema of its arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@valueclass
class ToolCall:
    """A tool call the model asked for.

    ``arguments`` is None when the model's arguments were not a JSON object; then
    ``error`` says why and the call is answered with a tool error, not a crash.
    """

    id: str
    name: str
    arguments: Mapping[str, Any] | None
    raw_arguments: str = ""
    error: str | None = None


@valueclass
class Message:
    """One chat message in the provider-neutral form every client translates."""

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # role == "tool": which call this answers
    is_error: bool = False  # role == "tool": the tool failed or was refused

    @cached_property
    def size_chars(self) -> int:
        """Characters this message puts on the wire (text, ids, names, call arguments).

        Computed once per message (it is immutable): a long act turn sizes the same
        messages for every request it builds.
        """
        size = len(self.content) + len(self.tool_call_id or "")
        for call in self.tool_calls:
            args = call.raw_arguments
            if not args and call.arguments is not None:
                args = json.dumps(call.arguments, ensure_ascii=False, separators=(",", ":"))
            size += len(call.id) + len(call.name) + len(args)
        return size


@valueclass
class Usage:
    """Tokens one reply used, cache reads and writes apart because they are priced apart."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens read from the provider's cache (cheaper)
    cache_write_tokens: int = 0  # prompt tokens written to the cache (Anthropic bills extra)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cached_tokens + other.cached_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@valueclass
class Reply:
    """One model turn: an assistant message, why it ended, and what it cost."""

    message: Message
    finish: Finish = "stop"
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    model: str = ""
    # False when the model has no known price: cost_usd is then 0 and max_cost_usd
    # cannot be enforced (the engine warns once).
    cost_known: bool = True
    # The provider's own finish/stop reason as sent (e.g. "max_tokens"), for reports.
    finish_detail: str = ""


@runtime_checkable
class Model(Protocol):
    """Anything that can answer a conversation, possibly with tool calls."""

    ref: str  # e.g. "openai:gpt-4o-mini", "script:fix.yaml"

    @property
    def position(self) -> int | None:
        """A scripted model's place in its script (resumed from the state); None otherwise."""
        ...

    def seek(self, position: int) -> None:
        """Go back to ``position`` (a resumed run); a model without a script ignores it."""
        ...

    def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        role: str = "act",
        timeout_s: float | None = None,
        max_output_tokens: int | None = None,
    ) -> Reply:
        """``max_output_tokens`` caps this reply's output (the run's remaining token
        budget); providers send it as their output-limit field, below their own default."""
        ...


class Unscripted:
    """The script members of ``Model`` for a model that plays no script: nothing to resume."""

    @property
    def position(self) -> int | None:
        return None

    def seek(self, position: int) -> None:
        """A real model's next answer does not depend on where a run resumed."""
