"""Each model request's output is capped by the token budget left after its prompt, and a
request the budget cannot pay for is never sent, the first one included."""

from __future__ import annotations

from loop_helpers import FINISHED, Rig, make_template, write

from looprun.loop.limits import MIN_OUTPUT_TOKENS
from looprun.models.anthropic import AnthropicModel
from looprun.models.base import Message
from looprun.models.openai import OpenAIModel
from looprun.models.scripted import ScriptedModel
from looprun.template.model import Limits


def test_every_call_is_capped_by_what_the_budget_has_left(rig: Rig) -> None:
    template = make_template(limits=Limits(max_iterations=3, max_tokens=5000))
    model = ScriptedModel([write("worse"), FINISHED, write("good"), FINISHED])
    result = rig.run(template, [], model=model)
    assert result.outcome == "done"
    caps = model.output_caps
    assert len(caps) == 4 and all(c is not None for c in caps)
    assert all(MIN_OUTPUT_TOKENS <= c < 5000 for c in caps)  # type: ignore[operator]
    assert caps == sorted(caps, reverse=True)  # the room shrinks as the run spends


def test_no_max_tokens_no_cap(rig: Rig) -> None:
    model = ScriptedModel([write("good"), FINISHED])
    assert rig.run(make_template(), [], model=model).outcome == "done"
    assert model.output_caps == [None, None]


def test_a_first_request_larger_than_the_budget_is_not_sent(rig: Rig) -> None:
    # no history to judge by: the estimated prompt (~40 tokens) exceeds the 30 left
    template = make_template(limits=Limits(max_iterations=3, max_tokens=30))
    model = ScriptedModel([write("good"), FINISHED])
    result = rig.run(template, [], intent="fix it " * 20, model=model)
    assert result.outcome == "exhausted" and result.code == "max_tokens"
    assert "cannot fund the next model call" in result.reason
    assert model.output_caps == []  # not one call
    assert result.usage.prompt_tokens == 0


class _NoClient:
    server = "nowhere"


def test_providers_send_the_cap_in_their_output_limit_field() -> None:
    msgs = [Message("user", "hi")]
    anthropic = AnthropicModel("claude-x", _NoClient(), max_output_tokens=8192)  # type: ignore[arg-type]
    assert anthropic.request_body(msgs, [], 300)["max_tokens"] == 300
    assert anthropic.request_body(msgs, [], 100_000)["max_tokens"] == 8192
    assert anthropic.request_body(msgs, [])["max_tokens"] == 8192
    official = OpenAIModel("gpt-x", _NoClient())  # type: ignore[arg-type]
    assert official.request_body(msgs, [], 300)["max_completion_tokens"] == 300
    assert "max_completion_tokens" not in official.request_body(msgs, [])
    local = OpenAIModel(
        "qwen",
        _NoClient(),  # type: ignore[arg-type]
        max_output_tokens=2000,
        output_tokens_field="max_tokens",
    )
    assert local.request_body(msgs, [], 300)["max_tokens"] == 300
    assert local.request_body(msgs, [], 5000)["max_tokens"] == 2000
