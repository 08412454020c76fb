"""The actor runs a real subprocess (a stand-in CLI on PATH): working directory, closed
stdin, private home, scrubbed environment, timeouts that kill the group, exit codes,
redacted raw output."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from tests.support.fake_agent_cli import install

from looprun.act.agent_role import agent_model
from looprun.act.agents.actor import AgentActor
from looprun.errors import LooprunError, UsageError
from looprun.loop.ports import AgentRequest
from looprun.template.model import AgentSpec, Constraints

KEY = "sk-ant-test-key-0123456789"


@pytest.fixture
def setup(tmp_path: Path):
    bindir = tmp_path / "bin"
    install(bindir, "claude")
    install(bindir, "codex")
    work = tmp_path / "work"
    work.mkdir()
    run = tmp_path / "run"
    log = tmp_path / "log.jsonl"

    def actor(mode: str, cli: str = "claude-code", **env: str) -> AgentActor:
        source = {
            "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
            "ANTHROPIC_API_KEY": KEY,
            "OPENAI_API_KEY": KEY + "-openai",
            "GITHUB_TOKEN": "ghp_other_secret_value",
            "FAKE_AGENT_MODE": mode,
            "FAKE_AGENT_LOG": str(log),
            **env,
        }
        return AgentActor(
            AgentSpec(cli=cli),
            Constraints(commands=("python -m pytest *",)),
            workdir=work,
            run_dir=run,
            artifacts=run / "artifacts",
            env=source,
        )

    def logged() -> list[dict]:
        return [json.loads(line) for line in log.read_text().splitlines()]

    return actor, work, run, logged


def _request(timeout: float = 30, **kw) -> AgentRequest:
    return AgentRequest(
        "fix the bug", "be careful", iteration=1, task_id="t", timeout_s=timeout, **kw
    )


def test_the_cli_runs_in_the_tree_with_stdin_closed_and_its_own_home(setup) -> None:
    actor, work, run, logged = setup
    report = actor("write:a.py=x = 2|stdin").act(_request())
    assert (work / "a.py").read_text() == "x = 2"
    assert report.exit_code == 0 and report.error == ""
    assert report.tool_calls == ("Write",) and report.turns == 2
    assert report.final_message == "All done, the bug is fixed."
    (entry,) = logged()
    assert entry["cwd"] == str(work)
    assert entry["stdin_devnull"] is True
    assert entry["home"] == str(run / "agent-home")
    # its own key passes; every other secret-looking variable does not
    assert "ANTHROPIC_API_KEY" in entry["env"]
    assert "GITHUB_TOKEN" not in entry["env"] and "OPENAI_API_KEY" not in entry["env"]
    argv = entry["argv"]
    assert argv[:2] == ["-p", "--output-format"]
    assert argv[argv.index("--allowedTools") + 1].endswith("Bash(python -m pytest:*)")
    assert argv[argv.index("--tools") + 1] == "Read,Edit,Write,Glob,Grep,Bash"
    assert argv[-2:] == ["--", "fix the bug"]  # a prompt is never taken for an option


def test_a_hung_cli_is_killed_with_its_whole_process_group(setup) -> None:
    actor, _, _, logged = setup
    started = time.monotonic()
    report = actor("hang").act(_request(timeout=1.5))
    assert time.monotonic() - started < 20
    assert report.exit_code is None and report.error == "timeout"
    child = next(e["child"] for e in logged() if "child" in e)
    assert not _alive(child)  # the child it started died with it


def _alive(pid: int) -> bool:
    """Running (a killed child that nobody reaped yet is a zombie: dead)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return False
        if state == "Z":
            return False
        time.sleep(0.05)
    return True


def test_an_exit_code_without_a_report_is_an_error_not_a_success(setup) -> None:
    actor, *_ = setup
    report = actor("exit:3").act(_request())
    assert report.exit_code == 3
    assert report.error == "crashed"
    assert report.tool_calls == () and report.prompt_tokens == 0


def test_the_raw_output_is_kept_per_iteration_with_secrets_redacted(setup) -> None:
    actor, _, run, _ = setup
    report = actor("leak").act(_request())
    raw = (run / "artifacts" / report.artifact).read_text()
    assert report.artifact == "agent-001.claude-code.log"
    assert "debug: key is" in raw and KEY not in raw
    assert '"type": "result"' in raw


def test_codex_running_totals_are_charged_per_call(setup) -> None:
    actor, *_ = setup
    a = actor("usage:1000/100", cli="codex")
    first = a.act(_request())
    assert (first.prompt_tokens, first.completion_tokens) == (1000, 100)
    assert first.session_id == "thread-fake-1"
    # resumed: Codex reports the session's total (1500/160), looprun charges the difference
    a = actor("usage:1500/160", cli="codex")
    second = a.act(_request(session_id=first.session_id, session_usage=first.session_usage))
    assert (second.prompt_tokens, second.completion_tokens) == (500, 60)
    assert second.session_usage == {"prompt_tokens": 1500, "completion_tokens": 160}


def test_claude_code_reports_per_call_and_its_cost_is_taken(setup) -> None:
    actor, *_ = setup
    report = actor("usage:300/40").act(
        _request(session_id="abc", session_usage={"prompt_tokens": 50, "completion_tokens": 5})
    )
    assert (report.prompt_tokens, report.completion_tokens) == (300, 40)
    assert report.session_usage == {"prompt_tokens": 350, "completion_tokens": 45}
    assert report.cost_usd == pytest.approx(0.01)


def test_a_missing_program_stops_with_the_package_to_install(tmp_path: Path) -> None:
    with pytest.raises(LooprunError, match="npm install -g @anthropic-ai/claude-code"):
        AgentActor(
            AgentSpec(cli="claude-code"),
            Constraints(),
            workdir=tmp_path,
            run_dir=tmp_path,
            artifacts=tmp_path,
            env={"PATH": str(tmp_path)},
        )


@pytest.mark.parametrize(
    ("cli", "ref", "name"),
    [
        ("claude-code", "anthropic:claude-sonnet-4-5", "claude-sonnet-4-5"),
        ("claude-code", "sonnet", "sonnet"),
        ("codex", "openai:gpt-5-codex", "gpt-5-codex"),
        ("codex", "default", ""),
        ("codex", None, ""),
        ("opencode", "openai:gpt-4.1", "openai/gpt-4.1"),
        ("opencode", "anthropic:claude-sonnet-4-5", "anthropic/claude-sonnet-4-5"),
        ("opencode", "openrouter/qwen3-coder", "openrouter/qwen3-coder"),
        ("gemini", "gemini:gemini-2.5-pro", "gemini-2.5-pro"),
        ("aider", "openai:gpt-4o", "openai/gpt-4o"),
        ("aider", "anthropic:claude-sonnet-4-5", "anthropic/claude-sonnet-4-5"),
        ("aider", "deepseek/deepseek-chat", "deepseek/deepseek-chat"),
    ],
)
def test_model_references_map_to_the_clis_names(cli: str, ref: str | None, name: str) -> None:
    assert agent_model(cli, ref) == name


def test_a_model_of_another_provider_is_refused() -> None:
    with pytest.raises(UsageError, match="--model: 'openai:gpt-4o' does not fit"):
        agent_model("claude-code", "openai:gpt-4o", "--model")
    with pytest.raises(UsageError, match="give gemini:<model> or a bare model name"):
        agent_model("gemini", "anthropic:claude-sonnet-4-5", "--model")


def _aider(tmp_path: Path, **env: str) -> AgentActor:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return AgentActor(
        AgentSpec(cli="aider"),
        Constraints(),
        workdir=work,
        run_dir=tmp_path / "run",
        artifacts=tmp_path / "run" / "artifacts",
        model="openai/gpt-4o",
        env={"PATH": os.environ["PATH"], "OPENAI_API_KEY": KEY, **env},
    )


def test_aider_is_found_where_its_setting_names_it_and_runs_headless(tmp_path: Path) -> None:
    exe = install(tmp_path / "venv-aider" / "bin", "aider")  # not on PATH
    log = tmp_path / "log.jsonl"
    actor = _aider(
        tmp_path,
        LOOPRUN_AIDER=str(exe),
        LOOPRUN_AIDER_BASE_URL="http://127.0.0.1:9/v1",
        AIDER_LOAD="commands.txt",  # the user's own aider settings do not reach it
        FAKE_AGENT_MODE="write:.aider.tags.cache.v4/cache.db=x|write:a.py=x = 2",
        FAKE_AGENT_LOG=str(log),
    )
    report = actor.act(_request())
    (start,) = [json.loads(line) for line in log.read_text().splitlines()]
    argv = start["argv"]
    for flag in ("--yes-always", "--no-auto-commits", "--no-gitignore", "--no-stream",
                 "--no-suggest-shell-commands", "--no-auto-test", "--no-check-update"):  # fmt: skip
        assert flag in argv
    assert argv[argv.index("--model") + 1] == "openai/gpt-4o"
    assert argv[-2:] == ["--message", "be careful\n\nfix the bug"]
    home = Path(start["home"])
    assert home == tmp_path / "run" / "agent-home"
    assert Path(argv[argv.index("--analytics-log") + 1]).parent == home / "aider"
    assert Path(argv[argv.index("--chat-history-file") + 1]).parent == home / "aider"
    assert "AIDER_OPENAI_API_BASE" in start["env"] and "AIDER_LOAD" not in start["env"]
    assert "GIT_INDEX_FILE" in start["env"] and "LITELLM_LOCAL_MODEL_COST_MAP" in start["env"]
    # its repo-map cache, made by this turn, is gone; its edit stays
    work = tmp_path / "work"
    assert not (work / ".aider.tags.cache.v4").exists()
    assert (work / "a.py").read_text() == "x = 2"
    # no analytics log with an exit event: not a finished aider turn
    assert report.error == "crashed"


@pytest.mark.parametrize("name", [".aider.conf.yml", ".env"])
def test_aider_does_not_run_on_a_tree_that_configures_it(tmp_path: Path, name: str) -> None:
    exe = install(tmp_path / "bin", "aider")
    log = tmp_path / "log.jsonl"
    actor = _aider(tmp_path, LOOPRUN_AIDER=str(exe), FAKE_AGENT_LOG=str(log))
    (tmp_path / "work" / name).write_text("load: evil.txt\n")
    with pytest.raises(LooprunError, match=f"the working tree has {name}: aider reads"):
        actor.act(_request())
    assert not log.exists()  # refused before it started


def test_a_missing_aider_names_its_setting_and_pip(tmp_path: Path) -> None:
    with pytest.raises(LooprunError, match=r"or name it in LOOPRUN_AIDER .*pip install aider-chat"):
        _aider(tmp_path, PATH=str(tmp_path))
