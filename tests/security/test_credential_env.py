"""Credentials are recognised by where they go, not only by their name: the variables
the engine and its documented integrations read for credentials (OTLP headers, proxies
with a password, provider keys, ...) never reach a command or an MCP server, and their
values never reach a record or a model provider."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import yaml
from tests.support.cli import looprun
from tests.support.fake_provider import FakeProvider, openai_reply
from tests.support.git_repos import git_repo
from tests.support.mcp_command import server_command
from tests.tracing.otlp_receiver import otlp_receiver

from looprun.system.proc import scrubbed_env
from looprun.system.redact import Redactor, secret_values

DOCS = Path(__file__).resolve().parents[2] / "docs"
# a variable's name wherever the docs write one (prose, `code`, ${VAR}, NAME=value)
DOCUMENTED = re.compile(r"(?<![A-Za-z0-9_])([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)(?![a-z0-9])")
# Documented names that are not environment variables at all (flags, error codes) or
# that carry no credential: each is here on purpose, and a new documented variable
# must be added here or be recognised as a credential.
NOT_CREDENTIALS = {
    # not environment variables
    "O_NOFOLLOW", "O_NONBLOCK", "O_EXCL", "O_CREAT", "RUN_ID", "API_KEY_INVALID",
    "OUTER_ID", "GIT_URL", "HEAD_ADDRESS",
    # addresses, switches, paths and limits
    "LOOPRUN_BASE_URL", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "GOOGLE_GEMINI_BASE_URL",
    "LOOPRUN_OPENCODE_BASE_URL", "LOOPRUN_CODEX_BASE_URL", "LOOPRUN_AIDER_BASE_URL",
    "LOOPRUN_RAY_ALLOWED_BASE_URLS", "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED", "LOOPRUN_OTEL_CONTENT",
    "LOOPRUN_MODEL", "LOOPRUN_ACT_MODEL", "LOOPRUN_PLAN_MODEL", "LOOPRUN_CONFIG",
    "LOOPRUN_CACHE_DIR", "LOOPRUN_EXECUTOR", "LOOPRUN_SANDBOX_BACKENDS", "LOOPRUN_CRASH_AT",
    "LOOPRUN_EXERCISED", "LOOPRUN_OUTCOME_FD", "LOOPRUN_AIDER", "LOOPRUN_RAY_WARM_IDLE_S",
    "LOOPRUN_RAY_HEAD_TIMEOUT_S", "LOOPRUN_RAY_WATCHDOG_S", "LOOPRUN_RAY_JOIN_TIMEOUT_S",
    "LOOPRUN_RAY_GRACE_S", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "GIT_WORK_TREE", "GIT_DIR",
    "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY", "GIT_INDEX_FILE", "GITHUB_STEP_SUMMARY",
    "GITHUB_ACTIONS", "GITHUB_WORKSPACE", "GITHUB_API_URL", "RUNNER_TEMP", "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME", "PYTEST_CURRENT_TEST", "PYTEST_PLUGINS", "PYTEST_ADDOPTS",
    "OPENCODE_DISABLE_PROJECT_CONFIG", "OPENCODE_CONFIG", "GEMINI_CLI_HOME", "FORCE_COLOR",
    "CLAUDE_CODE_MAX_RETRIES", "LITELLM_LOCAL_MODEL_COST_MAP", "CARGO_TARGET_DIR",
    "GIT_CEILING_DIRECTORIES", "NODE_OPTIONS", "PYTEST_VERSION", "GIT_CONFIG_NOSYSTEM",
    "GIT_NO_REPLACE_OBJECTS",
}  # fmt: skip
# what may never be called "not a credential", whatever the list above says
CREDENTIAL_WORDS = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|AUTH|HEADERS|COOKIE|CREDENTIAL|PROXY")
# variables a proxy reads: harmless as an address, a credential with userinfo
URL_VALUED = re.compile(r"PROXY$|_URLS?$|ENDPOINT$")


def _documented() -> set[str]:
    """Every variable-like ``NAME_LIKE_THIS`` in docs/*.md."""
    return {m.group(1) for page in DOCS.glob("*.md") for m in DOCUMENTED.finditer(page.read_text())}


def _credential_sample(name: str) -> tuple[str, str]:
    """A value of the form ``name`` carries a credential in, and the credential in it."""
    secret = f"c{uuid.uuid4().hex[:16]}"
    if URL_VALUED.search(name):
        return f"http://user:{secret}@proxy.invalid:3128", secret
    if name.endswith("HEADERS"):
        return f"authorization=Bearer%20{secret},x-team=core", secret
    return secret, secret


def test_every_documented_credential_variable_is_kept_from_commands_and_redacted() -> None:
    documented = _documented()
    assert {"OTEL_EXPORTER_OTLP_HEADERS", "OPENAI_API_KEY", "HTTPS_PROXY"} <= documented
    not_variables = {"API_KEY_INVALID"}  # Gemini's error code, quoted in docs/agents.md
    exempt = NOT_CREDENTIALS - not_variables
    wrongly_exempt = sorted(n for n in exempt if CREDENTIAL_WORDS.search(n))
    assert wrongly_exempt == [], "a credential name cannot be listed as harmless"
    stale = sorted(NOT_CREDENTIALS - documented)
    assert stale == [], "no longer documented: drop them from NOT_CREDENTIALS"
    uncovered = []
    for name in sorted(documented - NOT_CREDENTIALS):
        # also the per-signal forms the OpenTelemetry SDK reads
        forms = [name]
        if name.startswith("OTEL_EXPORTER_OTLP_") and "_TRACES_" not in name:
            forms += [name.replace("OTLP_", f"OTLP_{s}_") for s in ("TRACES", "METRICS", "LOGS")]
        for form in forms:
            value, secret = _credential_sample(form)
            env = {form: value, "PATH": "/usr/bin"}
            shown = Redactor(secret_values(env)).text(f"{form}={value} and alone: {secret}")
            if form in scrubbed_env(env) or secret in shown:
                uncovered.append(form)
    assert uncovered == [], "documented variables that carry credentials but leak"


def test_a_url_with_userinfo_is_a_credential_whatever_its_name() -> None:
    env = {"DATABASE_URL": "postgres://app:pw-9f8e7d6c@db/x", "HTTP_PROXY": "http://proxy:3128"}
    kept = scrubbed_env(env)
    assert "DATABASE_URL" not in kept and kept["HTTP_PROXY"] == "http://proxy:3128"
    assert "pw-9f8e7d6c" not in Redactor(secret_values(env)).text("password pw-9f8e7d6c")
    assert scrubbed_env(env, extra={"DATABASE_URL": "x"})["DATABASE_URL"] == "x"  # on purpose


def _template(tmp_path: Path) -> Path:
    doc = {
        "looprun": 1,
        "name": "env-probe",
        "sandbox": "off",
        "inputs": {"intent": {"type": "string", "required": True}},
        "act": {
            "prompt": "{{ task.goal }}",
            "tools": ["run", "mcp__t__environment"],
            "constraints": {"paths": {"allow": ["notes/**"]}, "commands": {"allow": ["python *"]}},
            "mcp": {"t": {"command": server_command()}},
        },
        "observe": {"done": {"run": "test -f notes/never.txt", "parser": "exit_code"}},
        "exit": ["done.ok"],
        "refine": [{"else": {"retry": "again"}}],
        "limits": {"max_iterations": 1},
    }
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_otlp_headers_reach_no_command_mcp_server_record_or_provider(tmp_path: Path) -> None:
    token = f"otlp-{uuid.uuid4().hex}"
    work = tmp_path / "work"
    (work / "notes").mkdir(parents=True)
    (work / "notes" / "printenv.py").write_text(
        "import os\nfor k, v in sorted(os.environ.items()):\n    print(f'{k}={v}')\n"
    )
    git_repo(work)
    printenv = "python notes/printenv.py"
    probe = "OTEL_EXPORTER_OTLP_HEADERS"
    with FakeProvider() as server, otlp_receiver() as collector:
        server.push(
            openai_reply(
                tool_calls=[
                    ("run", {"command": printenv}),
                    ("mcp__t__environment", {"name": probe}),
                ]
            ),
            openai_reply("nothing more"),
        )
        server.responder = lambda _request: openai_reply("nothing more")
        proc = looprun(
            str(_template(tmp_path)),
            "--intent",
            "print the environment",
            "--workdir",
            str(work),
            "--model",
            "openai:gpt-4o-mini",
            "--base-url",
            server.openai_url,
            "--json",
            cwd=tmp_path,
            env={
                "OPENAI_API_KEY": "sk-test-0000",
                "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
                probe: f"authorization=Bearer {token}",
            },
        )
        bodies = [r.body.decode() for r in server.requests]
    assert proc.stdout.strip(), proc.stderr
    summary: dict[str, Any] = json.loads(proc.stdout)
    events = [
        json.loads(line)
        for line in (Path(summary["run_dir"]) / "journal.jsonl").read_text().splitlines()
    ]
    results = {e["tool"]: e["result"] for e in events if e["event"] == "tool_call"}
    assert "PATH=" in results["run"], results  # the command ran and printed its env
    assert f"{probe}=" not in results["run"]  # without the variable, not just redacted
    assert results["mcp__t__environment"] == "(unset)"  # the MCP server never had it
    assert len(bodies) >= 2 and any("PATH" in b for b in bodies)  # the output went back
    assert [i for i, b in enumerate(bodies) if token in b] == []
    files = [p for p in (work / ".looprun").rglob("*") if p.is_file()]
    assert len(files) > 3
    assert [str(p) for p in files if token.encode() in p.read_bytes()] == []
    assert token not in proc.stderr and token not in proc.stdout
    # the SDK exporter sent the run's trace with the header, as the collector's token is
    # meant to go, and no span carries it
    assert collector.spans and {h.get("authorization") for h in collector.headers} == {
        f"Bearer {token}"
    }
    assert [b for b in collector.bodies if token.encode() in b] == []
