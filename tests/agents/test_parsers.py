"""The output parsers on outputs recorded from the real, pinned binaries
(tests/support/record_agent_outputs.py: the CLI against the loopback server)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.agent_clis import PINNED

from looprun.act.agents.aider import ANALYTICS_MARK, CHAT_MARK, Aider
from looprun.act.agents.claude import ClaudeCode
from looprun.act.agents.codex import Codex
from looprun.act.agents.gemini import Gemini
from looprun.act.agents.opencode import OpenCode

RECORDED = Path(__file__).with_name("recorded")
CLAUDE = RECORDED / f"claude-code-{PINNED['@anthropic-ai/claude-code']}"


def _claude(name: str):
    return ClaudeCode().parse((CLAUDE / f"{name}.jsonl").read_text())


def test_claude_code_edit() -> None:
    p = _claude("edit")
    assert p.ok and p.error == ""
    assert p.tool_calls == ["Read", "Edit"]
    assert p.turns == 3 and p.denials == []
    assert p.final_message == "Changed x to 2."
    assert p.model == "claude-sonnet-4-5"
    assert len(p.session_id) == 36
    # three streamed replies of 120 input / 30 output tokens, as the server reported them
    assert (p.prompt_tokens, p.completion_tokens) == (360, 90)
    assert p.cost_usd is not None and p.cost_usd > 0 and not p.cumulative


def test_claude_code_denied_command_is_a_denial_not_an_error() -> None:
    p = _claude("denied")
    assert p.ok  # Claude Code itself finished normally ...
    assert p.denials == ["Bash(python3 -c \"open('a.py', 'w').write('x = 3')\")"]
    assert p.final_message == "Done it."  # ... and claims it did it
    assert (CLAUDE / "denied.exit").read_text().strip() == "0"


def test_claude_code_max_turns() -> None:
    p = _claude("max_turns")
    assert not p.ok and p.error == "max_turns"
    assert p.tool_calls == ["Read", "Read", "Read"]
    assert "error_max_turns" in p.error_detail


def test_claude_code_rejected_key_is_auth_though_its_subtype_says_success() -> None:
    text = (CLAUDE / "auth_401.jsonl").read_text()
    assert '"subtype":"success"' in text and '"is_error":true' in text
    p = ClaudeCode().parse(text)
    assert not p.ok and p.error == "auth"
    assert "401" in p.error_detail and p.prompt_tokens == 0


@pytest.mark.parametrize("output", ["", "Error: something broke\n", '{"type":"system"}\n'])
def test_claude_code_without_a_result_event_crashed(output: str) -> None:
    p = ClaudeCode().parse(output)
    assert not p.ok and p.error == "crashed"


CODEX = RECORDED / f"codex-{PINNED['@openai/codex']}"


def _codex(name: str):
    return Codex().parse((CODEX / f"{name}.jsonl").read_text())


def test_codex_edit_reports_running_totals() -> None:
    p = _codex("edit")
    assert p.ok and p.error == ""
    assert p.tool_calls == ["command_execution"] and p.turns == 1
    assert p.final_message == "Changed x to 2."
    assert p.cumulative and (p.prompt_tokens, p.completion_tokens) == (240, 60)
    assert p.cost_usd is None  # Codex reports no cost: the price table prices it
    assert p.session_id


def test_codex_failure_is_only_in_turn_failed() -> None:
    p = _codex("auth_401")
    assert not p.ok and p.error == "auth"
    assert "401 Unauthorized" in p.error_detail
    # a warning item of type "error" (unknown model metadata) is not a failure
    assert '"type":"error","message":"Model metadata' in (CODEX / "edit.jsonl").read_text()


def test_codex_without_turn_completed_crashed() -> None:
    p = Codex().parse('{"type":"thread.started","thread_id":"t"}\n{"type":"turn.started"}\n')
    assert not p.ok and p.error == "crashed" and p.session_id == "t"


OPENCODE = RECORDED / f"opencode-{PINNED['opencode-ai']}"


def _opencode(name: str):
    return OpenCode().parse((OPENCODE / f"{name}.jsonl").read_text())


def test_opencode_edit_counts_each_model_call() -> None:
    p = _opencode("edit")
    assert p.ok and p.error == ""
    assert p.tool_calls == ["read", "edit"] and p.denials == []
    assert p.turns == 3  # one step_finish per model call
    assert p.final_message == "Changed x to 2."
    assert p.session_id.startswith("ses_")
    # three streamed replies of 120 input / 30 output tokens; opencode prices a model it
    # does not know at 0, which is no price: the table prices it
    assert (p.prompt_tokens, p.completion_tokens) == (360, 90)
    assert p.cost_usd is None and not p.cumulative
    text = (OPENCODE / "edit.jsonl").read_text()
    assert text.count('"status":"completed"') == 2 and '"status":"error"' not in text


def test_opencode_refused_command_is_a_denial_and_it_still_claims_success() -> None:
    p = _opencode("denied")
    assert p.ok and p.error == ""
    assert p.denials == ["bash(python3 -c \"open('a.py', 'w').write('x = 3')\")"]
    assert p.final_message == "Done it."
    assert (OPENCODE / "denied.exit").read_text().strip() == "0"


def test_opencode_rejected_key_is_auth() -> None:
    p = _opencode("auth_401")
    assert not p.ok and p.error == "auth"
    assert "401" in p.error_detail and "Incorrect API key" in p.error_detail
    assert (OPENCODE / "auth_401.exit").read_text().strip() == "1"


@pytest.mark.parametrize("output", ["", "Error: boom\n", '{"type":"step_start","part":{}}\n'])
def test_opencode_without_a_finished_step_crashed(output: str) -> None:
    p = OpenCode().parse(output)
    assert not p.ok and p.error == "crashed"


GEMINI = RECORDED / f"gemini-{PINNED['@google/gemini-cli']}"


def _gemini(name: str):
    return Gemini().parse((GEMINI / f"{name}.jsonl").read_text())


def test_gemini_edit() -> None:
    p = _gemini("edit")
    assert p.ok and p.error == ""
    assert p.tool_calls == ["read_file", "replace"] and p.denials == []
    assert p.turns == 3  # read, replace, the closing text: three model replies
    assert p.final_message == "Changed x to 2."
    assert p.model == "gemini-2.5-pro" and len(p.session_id) == 36
    # the result's stats add up this run's calls (120/30 each), not a session total
    assert (p.prompt_tokens, p.completion_tokens) == (360, 90)
    assert p.cost_usd is None and not p.cumulative
    # both calls ran; stderr notices are in the raw output too, the parser reads JSON lines
    text = (GEMINI / "edit.jsonl").read_text()
    assert text.count('"status":"success"') == 3 and '"status":"error"' not in text
    assert "Ripgrep is not available" in text


def test_gemini_refused_command_is_a_denial_and_it_still_claims_success() -> None:
    p = _gemini("denied")
    assert p.ok and p.error == ""
    assert p.denials == ["run_shell_command(python3 -c \"open('a.py', 'w').write('x = 3')\")"]
    assert p.final_message == "Done it."


def test_gemini_turn_cap_is_max_turns() -> None:
    p = _gemini("max_turns")
    assert not p.ok and p.error == "max_turns"
    assert p.tool_calls == ["read_file"] * 3 and p.turns == 3
    assert (GEMINI / "max_turns.exit").read_text().strip() == "53"


def test_gemini_invalid_key_is_auth_though_the_api_says_400() -> None:
    p = _gemini("bad_key")
    assert not p.ok and p.error == "auth"
    assert "API_KEY_INVALID" in p.error_detail and p.prompt_tokens == 0


@pytest.mark.parametrize("output", ["", '{"type":"init","session_id":"s"}\n'])
def test_gemini_without_a_result_event_crashed(output: str) -> None:
    p = Gemini().parse(output)
    assert not p.ok and p.error == "crashed"


AIDER = RECORDED / f"aider-{PINNED['aider-chat']}"


def _aider(name: str):
    return Aider().parse((AIDER / f"{name}.jsonl").read_text())


def test_aider_edit_from_its_console_analytics_log_and_transcript() -> None:
    p = _aider("edit")
    assert p.ok and p.error == ""
    assert p.tool_calls == ["edit(a.py)"] and p.denials == []
    assert p.turns == 1  # one message_send event in the analytics log
    assert (p.prompt_tokens, p.completion_tokens) == (120, 30) and not p.cumulative
    assert p.cost_usd is not None and p.cost_usd > 0  # priced by aider (litellm's table)
    assert p.model == "gpt-4o"
    assert p.final_message.startswith("Changed x to 2.")
    assert p.session_id == ""  # aider keeps no session


def test_aider_skipped_edit_of_an_ignored_file_is_a_denial() -> None:
    p = _aider("gitignored")
    assert p.ok and p.tool_calls == []
    assert p.denials == ["edit(notes.txt)"]
    assert p.final_message.startswith("Writing the notes.")


def test_aider_rejected_key_is_auth_though_it_exits_0() -> None:
    assert (AIDER / "auth_401.exit").read_text().strip() == "0"
    p = _aider("auth_401")
    assert not p.ok and p.error == "auth"
    assert p.error_detail.startswith("litellm.AuthenticationError:")
    assert "Incorrect API key provided" in p.error_detail  # unwrapped, from the transcript
    assert p.turns == 0 and p.prompt_tokens == 0 and p.cost_usd is None


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ("litellm.RateLimitError: RateLimitError: slow down", "rate_limit"),
        ("litellm.InternalServerError: InternalServerError: boom", "server"),
        ("litellm.APIConnectionError: APIConnectionError: refused", "server"),
        ("litellm.NotFoundError: NotFoundError: no such model", "api_error"),
    ],
)
def test_aider_failed_calls_are_classified_by_litellms_exception(line: str, error: str) -> None:
    exit_event = '{"event": "exit", "properties": {"reason": "Completed --message"}}'
    output = f"Aider v0.86.2\n{line}\n\n{ANALYTICS_MARK}\n{exit_event}\n\n{CHAT_MARK}\n"
    p = Aider().parse(output)
    assert not p.ok and p.error == error and p.error_detail == line


def test_aider_without_an_exit_event_crashed() -> None:
    p = Aider().parse("Traceback (most recent call last):\n  ...\nKeyError: 'x'\n")
    assert not p.ok and p.error == "crashed"
