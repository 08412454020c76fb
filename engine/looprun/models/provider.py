"""What the HTTP provider clients share: one request, its reply decoded and priced.

Each wire format (``openai``, ``anthropic``) supplies the request body and the decoding
of the answer; posting, naming the model in errors, pricing and closing are the same.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from looprun.errors import ModelError
from looprun.models.base import Finish, Message, Reply, ToolSpec, Unscripted, Usage
from looprun.models.http import JsonClient
from looprun.models.pricing import PriceTable

# (message, finish, provider's finish reason, usage, model as reported)
Decoded = tuple[Message, Finish, str, Usage, str]


class ProviderModel(Unscripted, ABC):
    """A model behind a provider's HTTP API; ``complete`` never raises for a model's mistakes."""

    provider: ClassVar[str]  # the ref's scheme, e.g. "openai"

    def __init__(self, model: str, client: JsonClient, *, prices: PriceTable | None = None):
        self.ref = f"{self.provider}:{model}"
        self.model = model
        self._client = client
        self._prices = prices or PriceTable()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r} at {self._client.server})"

    @abstractmethod
    def request_body(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        max_output_tokens: int | None = None,
    ) -> dict: ...

    @abstractmethod
    def decode(self, data: dict[str, Any]) -> Decoded:
        """The answer in provider-neutral terms; ValueError when it is not a reply."""

    def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        role: str = "act",
        timeout_s: float | None = None,
        max_output_tokens: int | None = None,
    ) -> Reply:
        body = self.request_body(messages, tools, max_output_tokens)
        data = self._client.post(body, timeout_s=timeout_s)
        try:
            message, finish, detail, usage, reported = self.decode(data)
        except ValueError as exc:
            raise ModelError(
                f"{self.provider} model {self.model!r} at {self._client.server}: "
                f"unexpected response: {exc}"
            ) from None
        # A server may report a dated or aliased name the price table does not know.
        cost, known = self._prices.cost(reported, usage)
        if not known and reported != self.model:
            cost, known = self._prices.cost(self.model, usage)
        return Reply(message, finish, usage, cost, reported, known, detail)

    def close(self) -> None:
        self._client.close()
