"""Model setup mistakes are usage errors: the real CLI exits 2 with one line, and no run
directory is created. (A key the server refuses, HTTP 401/403, stays a runtime error,
exit 1: see test_http_providers.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from e2e_helpers import git_init, looprun

from looprun.errors import EXIT_INVALID

TEMPLATE = """\
looprun: 1
name: setup
inputs:
  intent: {type: string, required: true}
plan: {mode: none}
act:
  prompt: "{{ intent }}"
  tools: [read_file, write_file]
observe:
  check: {run: "test -f done.txt", parser: exit_code}
exit: [check.ok]
limits: {max_iterations: 1}
"""

# no key, no server override, a config file of our own: nothing from the caller leaks in
NO_KEYS = {
    "OPENAI_API_KEY": "",
    "ANTHROPIC_API_KEY": "",
    "LOOPRUN_BASE_URL": "",
    "ANTHROPIC_BASE_URL": "",
    "LOOPRUN_ACT_MODEL": "",
    "LOOPRUN_PLAN_MODEL": "",
}


def attempt(tmp: Path, config: str, *args: str) -> tuple[int, str, Path]:
    repo = tmp / "repo"
    repo.mkdir()
    (repo / "README.md").write_text("a project\n")
    git_init(repo)
    template = tmp / "setup.yaml"
    template.write_text(TEMPLATE)
    config_file = tmp / "config.yaml"
    config_file.write_text(config)
    proc = looprun(
        str(template),
        "--intent",
        "write done.txt",
        "--workdir",
        str(repo),
        *args,
        env={**NO_KEYS, "LOOPRUN_CONFIG": str(config_file)},
        timeout=60,
    )
    return proc.returncode, proc.stderr, repo


@pytest.mark.parametrize(
    ("ref", "variable"),
    [("openai:gpt-4o-mini", "OPENAI_API_KEY"), ("anthropic:claude-haiku-4-5", "ANTHROPIC_API_KEY")],
)
def test_a_missing_key_is_a_usage_error_before_any_run_directory(
    tmp_path: Path, ref: str, variable: str
) -> None:
    code, err, repo = attempt(tmp_path, "{}\n", "--model", ref)
    assert code == EXIT_INVALID, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    scheme, name = ref.split(":")
    assert lines[0].startswith(f"looprun: {scheme} model {name!r} at ")
    assert f"no API key; set {variable}, " in lines[0]
    assert f"api_key_env.{scheme} in the config file ({tmp_path / 'config.yaml'})" in lines[0]
    assert not (repo / ".looprun").exists()  # nothing ran, nothing to clean up


def test_the_variable_the_config_file_names_is_the_one_asked_for(tmp_path: Path) -> None:
    config = "models: {default: 'anthropic:claude-haiku-4-5'}\napi_key_env: {anthropic: TEAM_KEY}\n"
    code, err, repo = attempt(tmp_path, config)
    assert code == EXIT_INVALID, err
    assert "no API key; set TEAM_KEY, " in err and "ANTHROPIC_API_KEY" not in err
    assert not (repo / ".looprun").exists()


def test_a_missing_key_and_a_missing_model_exit_alike(tmp_path: Path) -> None:
    code, err, repo = attempt(tmp_path, "{}\n")  # nothing names a model at all
    assert code == EXIT_INVALID, err
    assert "no model for the act role" in err
    assert not (repo / ".looprun").exists()
