"""Model references, the config file, precedence, prices, and error-body parsing."""

from __future__ import annotations

import email.utils
import json
import time
from pathlib import Path

import httpx
import pytest

from looprun.errors import EXIT_INVALID, ModelError, ModelSetupError, UsageError
from looprun.models import anthropic as anthropic_wire
from looprun.models import openai as openai_wire
from looprun.models.base import Message, Usage
from looprun.models.config import Config, config_path, load_config
from looprun.models.http import parse_retry_after, server_error
from looprun.models.pricing import Price, PriceTable
from looprun.models.registry import model_ref_for_role, resolve_model
from looprun.models.scripted import ScriptedModel


def test_unknown_scheme_lists_the_known_ones() -> None:
    with pytest.raises(UsageError) as info:
        resolve_model("gemini:pro", env={})
    assert "openai:<model>" in str(info.value) and "script:<file>" in str(info.value)
    with pytest.raises(UsageError):
        resolve_model("openai:", env={})


def test_a_missing_key_is_a_setup_error_that_exits_like_usage(tmp_path: Path) -> None:
    config = Config(source=str(tmp_path / "c.yaml"), api_key_env={"anthropic": "TEAM_KEY"})
    with pytest.raises(ModelSetupError) as info:
        resolve_model("anthropic:claude-haiku-4-5", env={}, config=config)
    assert info.value.exit_code == UsageError.exit_code == EXIT_INVALID
    assert isinstance(info.value, ModelError)  # callers catching model errors still do
    assert str(info.value) == (
        "anthropic model 'claude-haiku-4-5' at https://api.anthropic.com: no API key; set "
        f"TEAM_KEY, or name the variable that holds it with api_key_env.anthropic in the "
        f"config file ({tmp_path / 'c.yaml'})"
    )
    # with the key set, or at a local server, nothing is refused
    resolve_model("anthropic:claude-haiku-4-5", env={"TEAM_KEY": "k"}, config=config)
    resolve_model("openai:llama3.2", env={}, base_url="http://127.0.0.1:9/v1")


def test_script_reference_loads_the_scripted_model(tmp_path: Path) -> None:
    script = tmp_path / "turns.yaml"
    script.write_text("- text: hello\n", encoding="utf-8")
    model = resolve_model(f"script:{script}")
    assert isinstance(model, ScriptedModel)
    assert model.complete([Message("user", "hi")], []).message.content == "hello"


def test_role_precedence_cli_env_config_template() -> None:
    config = Config(models={"plan": "anthropic:claude-sonnet-4-5", "default": "openai:cfg"})
    template = {"plan": "openai:tpl-plan", "act": "openai:tpl-act"}
    env = {"LOOPRUN_MODEL": "openai:env-all", "LOOPRUN_PLAN_MODEL": "openai:env-plan"}

    def pick(role, **kw):
        args = {"env": {}, "config": Config(), "template_models": template, **kw}
        return model_ref_for_role(role, **args)

    assert pick("act") == "openai:tpl-act"
    assert pick("act", config=config) == "openai:cfg"
    assert pick("plan", config=config) == "anthropic:claude-sonnet-4-5"
    assert pick("plan", config=config, env=env) == "openai:env-plan"
    assert pick("act", config=config, env=env) == "openai:env-all"
    assert pick("act", config=config, env=env, cli_model="openai:cli") == "openai:cli"
    assert (
        pick("plan", env=env, cli_model="openai:cli", cli_role_models={"plan": "openai:cli-plan"})
        == "openai:cli-plan"
    )
    # "default" in a template means no preference.
    with pytest.raises(UsageError, match="no model for the act role"):
        model_ref_for_role("act", env={}, template_models={"act": "default"})
    with pytest.raises(UsageError, match="unknown model reference"):
        model_ref_for_role("act", env={"LOOPRUN_MODEL": "gpt-4o"})


def test_base_url_precedence(tmp_path: Path) -> None:
    def server_of(**kw):
        return repr(resolve_model("openai:m", **kw))

    cfg = Config(base_url="http://localhost:1111/v1")
    env = {"LOOPRUN_BASE_URL": "http://localhost:2222/v1"}
    assert "localhost:1111" in server_of(config=cfg, env={})
    assert "localhost:2222" in server_of(config=cfg, env=env)
    assert "localhost:3333" in server_of(base_url="http://localhost:3333/v1", config=cfg, env=env)


def test_config_file_is_read_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "models: {plan: 'anthropic:claude-sonnet-4-5', act: 'openai:gpt-4o-mini'}\n"
        "base_url: http://localhost:11434/v1\n"
        "api_key_env: {openai: OPENROUTER_API_KEY}\n"
        "retry: {max_attempts: 3, timeout_s: 30}\n"
        "prices:\n  qwen2.5-coder: {input: 0.2, output: 0.6}\n",
        encoding="utf-8",
    )
    config = load_config(env={"LOOPRUN_CONFIG": str(path)})
    assert config.models["plan"] == "anthropic:claude-sonnet-4-5"
    assert config.retry.max_attempts == 3 and config.retry.timeout_s == 30
    assert config.prices["qwen2.5-coder"] == Price(0.2, 0.6)
    assert config.api_key_env["openai"] == "OPENROUTER_API_KEY"
    # The key variable the config names is the one used.
    with pytest.raises(ModelError) as info:
        resolve_model(
            "openai:gpt-4o",
            config=Config(base_url="https://api.openai.com/v1", api_key_env={"openai": "MY_KEY"}),
            env={},
        )
    assert "MY_KEY" in str(info.value)


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        ("models: [a, b]\n", ":1:9", "models: expected a mapping"),
        ("retry:\n  max_atempts: 3\n", ":2:3", "unknown keys ['max_atempts']"),
        ("retry: {timeout_s: -1}\n", ":1:20", "non-negative number"),
        ("prices:\n  m: {input: 1}\n", ":2:6", "missing 'output'"),
        ("colour: blue\n", ":1:1", "unknown keys ['colour']"),
        ("models: {plan: [\n", ":2:1", "not valid YAML"),
    ],
)
def test_config_mistakes_name_file_line_and_problem(tmp_path, text, where, problem) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UsageError) as info:
        load_config(path)
    message = str(info.value)
    assert message.startswith(f"{path}{where}"), message
    assert problem in message


def test_missing_default_config_is_empty_but_missing_explicit_one_is_an_error(tmp_path) -> None:
    env = {"HOME": str(tmp_path)}
    assert config_path(env) == tmp_path / ".config" / "looprun" / "config.yaml"
    assert load_config(env=env) == Config()
    with pytest.raises(UsageError, match="config file not found"):
        load_config(env={"LOOPRUN_CONFIG": str(tmp_path / "nope.yaml")})


def test_price_lookup_and_cost() -> None:
    table = PriceTable({"my-local": Price(0.0, 0.0), "gpt-4o": Price(1.0, 2.0)})
    assert table.lookup("gpt-4o-mini-2024-07-18") == table.lookup("gpt-4o-mini")
    assert table.lookup("claude-haiku-4-5-20251001") is not None
    assert table.lookup("openai/gpt-4o-mini") is not None  # a router's spelling
    assert table.lookup("gpt-4o-minix") is None  # never a loose match
    assert table.cost("gpt-4o", Usage(1_000_000, 1_000_000)) == (3.0, True)  # user override
    assert table.cost("my-local", Usage(5, 5)) == (0.0, True)
    assert table.cost("mystery", Usage(5, 5)) == (0.0, False)


def test_retry_after_forms() -> None:
    now = time.time()
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert parse_retry_after(httpx.Headers({"retry-after": "12"})) == 12.0
    assert 28 <= (parse_retry_after(httpx.Headers({"retry-after": date}), now) or 0) <= 31
    assert parse_retry_after(httpx.Headers({"retry-after-ms": "1500", "retry-after": "9"})) == 1.5
    assert parse_retry_after(httpx.Headers({"retry-after": "soon"})) is None
    assert parse_retry_after(httpx.Headers({})) is None


def test_retry_with_mock_transport_and_http_date(recorder) -> None:
    """Unit level: an injected httpx.MockTransport instead of a server."""
    answers = [
        httpx.Response(
            503,
            headers={"retry-after": email.utils.formatdate(time.time() + 5, usegmt=True)},
            json={"error": {"message": "maintenance"}},
        ),
        httpx.Response(
            200,
            json={
                "choices": [
                    {"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
                ]
            },
        ),
    ]
    transport = httpx.MockTransport(lambda request: answers.pop(0))
    model = resolve_model(
        "openai:m",
        base_url="http://localhost:9/v1",
        env={},
        transport=transport,
        on_event=recorder.event,
        sleep=recorder.sleep,
    )
    reply = model.complete([Message("user", "x")], [])
    assert reply.message.content == "ok" and reply.usage == Usage()
    assert 3.5 <= recorder.sleeps[0] <= 5.5


@pytest.mark.parametrize(
    ("body", "message", "code"),
    [
        (
            b'{"error": {"message": "bad", "type": "invalid_request_error", "code": "x"}}',
            "bad",
            "x",
        ),
        (
            b'{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}',
            "Overloaded",
            "overloaded_error",
        ),
        (b'{"error": "model not found"}', "model not found", ""),
        (
            b'{"object": "error", "message": "too long", "type": "BadRequestError"}',
            "too long",
            "BadRequestError",
        ),
        (b"<html>502 Bad Gateway</html>", "<html>502 Bad Gateway</html>", ""),
    ],
)
def test_server_error_shapes(body, message, code) -> None:
    assert server_error(body) == (message, code)


# --- real recorded bodies from other projects (read only; skipped when absent) -------------

FIXTURES = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "llm"


def _fixture(name: str) -> dict:
    path = FIXTURES / name
    if not path.is_file():
        pytest.skip("shared provider fixtures not available")
    return json.loads(path.read_text(encoding="utf-8"))


def test_recorded_openai_bodies_parse() -> None:
    message, finish, _, usage, model = openai_wire.reply_from_wire(
        _fixture("openai-chat-tool-calls.json"), "gpt-4o-mini"
    )
    assert finish == "tool_calls" and message.tool_calls[0].arguments == {"country": "Crumpet"}
    assert usage.prompt_tokens == 92 and model.startswith("gpt-4o-mini")
    message, finish, *_ = openai_wire.reply_from_wire(_fixture("openai-chat-final-stop.json"), "m")
    assert (message.content, finish) == ("YES", "stop")
    text, code = server_error(
        json.dumps(_fixture("openai-compatible-openrouter-error-429.json")).encode()
    )
    assert code == "429"  # a number there, not a string
    assert text.startswith("Provider returned error: ") and "rate-limited upstream" in text


def test_recorded_anthropic_bodies_parse() -> None:
    message, finish, detail, usage, _ = anthropic_wire.reply_from_wire(
        _fixture("anthropic-messages-text-and-tool-use.json"), "m"
    )
    assert (finish, detail) == ("tool_calls", "tool_use")
    assert message.content.startswith("# The Wonderful World")
    assert message.tool_calls[0].name == "submit_analysis"
    assert usage.completion_tokens == 995
    message, finish, *_ = anthropic_wire.reply_from_wire(
        _fixture("anthropic-messages-end-turn.json"), "m"
    )
    assert finish == "stop" and "20°C" in message.content
    text, code = server_error(
        json.dumps(_fixture("anthropic-error-400-invalid-request.json")).encode()
    )
    assert code == "invalid_request_error" and "tool_use_id" in text
