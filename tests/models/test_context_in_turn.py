"""The act turn's model call goes through the context budget: one trim after the server
says the request is too long (kept for the rest of the run), and calibration from the
prompt tokens the server reports. A real client against the loopback server."""

from __future__ import annotations

from typing import Any

from tests.support.fake_provider import FakeProvider, openai_error, openai_reply

from looprun.errors import ContextTooLong
from looprun.loop.act.tool_turn import _ask
from looprun.loop.context import ContextBudget
from looprun.loop.ports import KeepRecent, NullJournal, Ports
from looprun.models.base import Message
from looprun.models.config import Config
from looprun.models.http import RetryPolicy
from looprun.models.registry import resolve_model


class Events(NullJournal):
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def event(self, kind: str, **data: Any) -> None:
        self.events.append((kind, data))


def ports_for(model: Any, context: Any, journal: Events, lines: list[str]) -> Ports:
    unused: Any = None  # the model call touches only the model, context, journal, report
    return Ports(model, unused, unused, unused, unused, journal, context, report=lines.append)


PINNED = [Message("system", "You fix bugs.")]
ROUNDS = [[Message("user", "Intent: division by zero in invoice totals\n" + "x" * 4000)]]


def test_one_trim_is_kept_and_usage_calibrates_the_estimate() -> None:
    with FakeProvider() as server:
        model = resolve_model(
            "openai:gpt-4o-mini",
            base_url=server.openai_url,
            config=Config(retry=RetryPolicy(backoff_base_s=0.01)),
            env={},
        )
        budget = ContextBudget(2000, recent_rounds=3)
        estimate = budget.estimate(budget.build(PINNED, ROUNDS))
        server.push(
            openai_error(400, "maximum context length exceeded", code="context_length_exceeded"),
            openai_reply("ok", prompt_tokens=2 * estimate),
        )
        journal, lines = Events(), []
        ports = ports_for(model, budget, journal, lines)
        reply, sent = _ask(ports, PINNED, ROUNDS, [], timeout_s=10, iteration=1)
        assert reply.message.content == "ok"
        assert [k for k, _ in journal.events] == ["context_trimmed"]
        assert journal.events[0][1]["to_tokens"] == 1000
        assert budget.budget_tokens == 1000  # the run keeps the trimmed budget
        assert 1.8 < budget.correction < 2.3  # the server counted twice the estimate
        assert len(sent[-1].content) < len(ROUNDS[0][0].content)  # built to the half budget
        assert sent[-1].content.startswith("Intent: division by zero")
        assert "too long" in lines[0]
        # a second refusal in the same call is not trimmed again
        too_long = openai_error(400, "prompt is too long", code="context_length_exceeded")
        server.push(too_long, too_long, too_long)
        try:
            _ask(ports, PINNED, ROUNDS, [], timeout_s=10, iteration=2)
        except ContextTooLong:
            pass
        else:
            raise AssertionError("the second refusal should propagate")
        assert [k for k, _ in journal.events] == ["context_trimmed"] * 2
        assert len(server.requests) == 4


def test_a_plain_builder_is_used_as_is() -> None:
    with FakeProvider() as server:
        model = resolve_model("openai:gpt-4o-mini", base_url=server.openai_url, env={})
        server.push(openai_reply("ok"))
        journal, lines = Events(), []
        ports = ports_for(model, KeepRecent(0, 3), journal, lines)
        reply, sent = _ask(ports, PINNED, ROUNDS, [], timeout_s=10, iteration=1)
        assert reply.message.content == "ok" and sent == [*PINNED, *ROUNDS[0]]
