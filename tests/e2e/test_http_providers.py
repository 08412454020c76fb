"""The real CLI in a subprocess against a loopback server speaking the OpenAI and Anthropic
wire formats: the server plays a real fix of samples/invoice, deciding every answer from the
conversation it is sent, and checks that every request is valid for its provider."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_helpers import looprun, sample_copy
from tests.support.fake_provider import (
    Canned,
    FakeProvider,
    Recorded,
    anthropic_error,
    anthropic_reply,
    anthropic_request_problems,
    conversation,
    openai_error,
    openai_reply,
    openai_request_problems,
)

OPENAI_KEY = "sk-proj-e2e-7d1f0c9a4b2e8f6a"
ANTHROPIC_KEY = "sk-ant-e2e-3b8e2d7c1a9f4e05"
INTENT = (
    "division by zero in invoice totals: the summary of an invoice whose lines are all "
    "cancelled (quantity 0) crashes instead of reporting zero"
)
NEW_TEST = """from invoice.totals import Line, summary


def test_summary_of_an_invoice_with_only_cancelled_lines():
    result = summary([Line("cancelled widget", 0, 1250)])
    assert result["total"] == 0
    assert result["average_unit_price"] == 0
"""
UNITS = "    units = sum(line.quantity for line in lines)\n"
WRONG_FIX = "    if not lines:\n        return 0\n" + UNITS
RIGHT_FIX = UNITS + "    if units == 0:\n        return 0\n"
PLAN = {
    "tasks": [
        {
            "id": "reproduce",
            "goal": "Add a test showing the crash for an invoice of cancelled lines.",
            "done_when": "tests.failed > 0 and tests.errors == 0",
        },
        {
            "id": "fix",
            "goal": "Make the whole suite pass.",
            "done_when": "tests.ok",
            "depends_on": ["reproduce"],
        },
    ]
}


class InvoiceFix:
    """Answers like a model fixing samples/invoice, from the conversation so far.

    Task ``reproduce``: write the failing test. Task ``fix``: a first fix that misses the
    cause, then (once the checks have said so) the real one. A turn ends with a text
    reply after the tool results come back. A request with no tools is the planner's.
    """

    def __init__(self, provider: str, *, cut_off_first: bool = False):
        self.provider = provider
        self.cut_off_first = cut_off_first
        self.problems: list[str] = []
        self.sent: list[tuple[str, int, int, int]] = []  # (model, prompt, cached, completion)
        self.models: list[str] = []  # the model each request asked for

    def __call__(self, request: Recorded) -> Canned:
        body = request.json()
        if self.provider == "openai":
            problems = openai_request_problems(body)
        else:
            problems = anthropic_request_problems(body, request.headers)
        self.problems += problems
        if problems:
            return canned_error(self.provider, 400, "; ".join(problems))
        self.models.append(body["model"])
        said = conversation(body)
        if not body.get("tools"):
            return self.reply(body["model"], json.dumps(PLAN), [])
        prompts = [i for i, m in enumerate(said) if "Current task (" in m.text]
        match = re.search(r"Current task \((\w+), iteration (\d+)\)", said[prompts[-1]].text)
        assert match, said[prompts[-1]].text
        task, iteration = match.group(1), int(match.group(2))
        since = said[prompts[-1] + 1 :]
        if self.cut_off_first and not since:
            self.cut_off_first = False
            return self.reply(body["model"], "I will write a test that", [], cut_off=True)
        if any(m.role == "tool" for m in since):
            return self.reply(body["model"], f"{task}: my change is in place.", [])
        if task == "reproduce":
            calls = [("write_file", {"path": "tests/test_cancelled_lines.py", "content": NEW_TEST})]
        elif iteration == 1:
            calls = [("edit_file", {"path": "invoice/totals.py", "old": UNITS, "new": WRONG_FIX})]
        else:
            calls = [
                ("read_file", {"path": "invoice/totals.py"}),
                ("edit_file", {"path": "invoice/totals.py", "old": WRONG_FIX, "new": RIGHT_FIX}),
            ]
        return self.reply(body["model"], None, calls)

    def reply(
        self, model: str, text: str | None, calls: list[Any], *, cut_off: bool = False
    ) -> Canned:
        n = len(self.sent) + 1
        prompt, cached, completion = 1000 + 100 * n, 200 if n > 1 else 0, 40 + n
        self.sent.append((model, prompt, cached, completion))
        if self.provider == "openai":
            finish = "length" if cut_off else None
            return openai_reply(
                text,
                tool_calls=calls,
                finish=finish,
                prompt_tokens=prompt,
                cached_tokens=cached,
                completion_tokens=completion,
                model=model,
            )
        return anthropic_reply(
            text,
            tool_calls=calls,
            stop_reason="max_tokens" if cut_off else None,
            input_tokens=prompt - cached,  # the Messages API counts cache reads apart
            cache_read=cached,
            output_tokens=completion,
            model=model,
        )


def canned_error(provider: str, status: int, message: str, **kw: Any) -> Canned:
    if provider == "openai":
        return openai_error(status, message, **kw)
    return anthropic_error(status, "invalid_request_error", message, **kw)


MODELS = {"openai": "openai:gpt-4o-mini", "anthropic": "anthropic:claude-haiku-4-5"}
# USD per token: input, cached input, output (the built-in price table).
PRICES = {"gpt-4o-mini": (0.15e-6, 0.075e-6, 0.60e-6), "claude-haiku-4-5": (1e-6, 0.1e-6, 5e-6)}


@pytest.fixture
def server() -> Iterator[FakeProvider]:
    with FakeProvider() as running:
        yield running


def run(
    server: FakeProvider,
    tmp: Path,
    *args: str,
    model: str | None = "openai:gpt-4o-mini",
    template: str = "bugfix",
    config: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    variants: int = 0,
) -> tuple[Any, Path]:
    """``looprun TEMPLATE`` on a fresh copy of samples/invoice, talking to ``server``; with
    no held-out variants asked for unless ``variants`` (these tests count the act and plan
    requests; the variants' call has tests of its own)."""
    workdir = sample_copy("invoice", tmp)
    config_file = tmp / "config.yaml"
    settings = {"retry": {"backoff_base_s": 0.01, "backoff_max_s": 0.05, "timeout_s": 20}}
    config_file.write_text(yaml.safe_dump({**settings, **(config or {})}))
    full_env = {
        "LOOPRUN_CONFIG": str(config_file),
        "ANTHROPIC_BASE_URL": server.url,
        "OPENAI_API_KEY": OPENAI_KEY,
        "ANTHROPIC_API_KEY": ANTHROPIC_KEY,
        **(env or {}),
    }
    cli = [template, "--intent", INTENT, "--workdir", str(workdir), "--base-url"]
    cli += [server.openai_url, "--json", *args]
    if model:
        cli += ["--model", model]
    cli += ["--set", f"holdout_variants={variants}"]  # every template here is a bugfix
    return looprun(*cli, env=full_env), workdir


def journal(workdir: Path) -> list[dict[str, Any]]:
    (run_dir,) = (workdir / ".looprun" / "runs").iterdir()
    lines = (run_dir / "journal.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def files_holding(workdir: Path, *secrets: str) -> list[str]:
    files = [p for p in (workdir / ".looprun").rglob("*") if p.is_file()]
    assert files
    return [str(p) for p in files if any(s.encode() in p.read_bytes() for s in secrets)]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_real_fix_over_http_with_retries(
    provider: str, server: FakeProvider, tmp_path: Path
) -> None:
    player = InvoiceFix(provider)
    server.responder = player
    key = OPENAI_KEY if provider == "openai" else ANTHROPIC_KEY  # echoed back: never kept
    retry_after = {"Retry-After": "0", "content-type": "application/json"}
    server.push(
        canned_error(provider, 429, f"rate limited for key {key}", headers=retry_after),
        canned_error(provider, 500, "internal server error"),
    )
    proc, workdir = run(server, tmp_path, model=MODELS[provider])
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["outcome"] == "done"
    assert [t["outcome"] for t in summary["tasks"]] == ["done", "done"]
    assert player.problems == []
    # what the server reported, summed, is what the run reports
    assert len(player.sent) == 6  # 3 iterations of (tool call, closing text)
    prompt = sum(p for _, p, _, _ in player.sent)
    completion = sum(c for _, _, _, c in player.sent)
    fresh, cached, out = PRICES[MODELS[provider].split(":")[1]]
    cost = sum((p - c) * fresh + c * cached + o * out for _, p, c, o in player.sent)
    assert summary["usage"]["prompt_tokens"] == prompt
    assert summary["usage"]["completion_tokens"] == completion
    assert summary["usage"]["cost_usd"] == pytest.approx(cost, abs=5e-7)  # shown to 6 places
    # the retries are journaled, shown, and the keys went only into request headers
    events = journal(workdir)
    retries = [e for e in events if e["event"] == "model_retry"]
    assert [(r["attempt"], r["reason"][:8]) for r in retries] == [(1, "HTTP 429"), (2, "HTTP 500")]
    assert "retrying" in proc.stderr and key not in proc.stderr
    first = server.requests[0].headers
    if provider == "openai":
        assert first["authorization"] == f"Bearer {OPENAI_KEY}"
    else:
        assert first["x-api-key"] == ANTHROPIC_KEY and first["anthropic-version"]
    assert files_holding(workdir, OPENAI_KEY, ANTHROPIC_KEY) == []
    assert "average_unit_price_cents" in (workdir / "invoice" / "totals.py").read_text()
    assert "if units == 0" in (workdir / "invoice" / "totals.py").read_text()


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_refused_key_ends_with_one_actionable_line(
    provider: str, server: FakeProvider, tmp_path: Path
) -> None:
    key = OPENAI_KEY if provider == "openai" else ANTHROPIC_KEY
    server.push(canned_error(provider, 401, f"Incorrect API key provided: {key}"))
    proc, workdir = run(server, tmp_path, model=MODELS[provider])
    assert proc.returncode == 1
    summary = json.loads(proc.stdout)
    assert summary["outcome"] == "error"
    assert "HTTP 401" in summary["reason"] and "_API_KEY" in summary["reason"]
    assert "\n" not in summary["reason"]
    assert "Traceback" not in proc.stderr
    assert key not in proc.stdout + proc.stderr
    assert len(server.requests) == 1  # not retried
    assert files_holding(workdir, key) == []


def test_context_too_long_trims_exactly_once_and_carries_on(
    server: FakeProvider, tmp_path: Path
) -> None:
    player = InvoiceFix("openai")
    server.responder = player
    server.push(
        openai_error(
            400,
            "This model's maximum context length is 128000 tokens.",
            code="context_length_exceeded",
        )
    )
    proc, workdir = run(server, tmp_path, "--max-iterations", "1")
    summary = json.loads(proc.stdout)
    assert summary["tasks"][0]["outcome"] == "done", proc.stderr
    trims = [e for e in journal(workdir) if e["event"] == "context_trimmed"]
    assert [(t["from_tokens"], t["to_tokens"]) for t in trims] == [(24000, 12000)]
    assert "too long" in proc.stderr
    assert player.problems == []


def test_a_second_context_refusal_is_an_error_not_a_loop(
    server: FakeProvider, tmp_path: Path
) -> None:
    too_long = openai_error(400, "prompt is too long", code="context_length_exceeded")
    server.push(too_long, too_long, too_long)
    proc, workdir = run(server, tmp_path)
    assert proc.returncode == 1
    assert "too long" in json.loads(proc.stdout)["reason"]
    assert len(server.requests) == 2
    assert len([e for e in journal(workdir) if e["event"] == "context_trimmed"]) == 1


def test_max_cost_trips_exhausted_with_prices_from_the_config_file(
    server: FakeProvider, tmp_path: Path
) -> None:
    template = tmp_path / "cheap.yaml"
    template.write_text(
        "looprun: 1\nname: cheap_bugfix\ndescription: bugfix on a budget\n"
        "extends: bugfix\nlimits: {max_cost_usd: 0.005}\n"
    )
    player = InvoiceFix("openai")
    server.responder = player
    prices = {"house-model": {"input": 2.0, "output": 10.0}}  # USD per million tokens
    proc, workdir = run(
        server,
        tmp_path,
        model=None,
        template=str(template),
        config={"prices": prices, "models": {"default": "openai:house-model"}},
    )
    summary = json.loads(proc.stdout)
    assert (summary["outcome"], summary["code"]) == ("exhausted", "max_cost_usd"), proc.stderr
    assert proc.returncode == 3
    assert set(player.models) == {"house-model"}  # the config file named the model
    cost = sum(p * 2e-6 + c * 10e-6 for _, p, _, c in player.sent)
    assert cost >= 0.005 and summary["usage"]["cost_usd"] == pytest.approx(cost)
    assert len(player.sent) == 2  # about $0.0027 each: the second call crosses the cap
    (finished,) = [e for e in journal(workdir) if e["event"] == "run_finished"]
    assert finished["code"] == "max_cost_usd"


def test_unpriced_model_warns_that_max_cost_cannot_be_enforced(
    server: FakeProvider, tmp_path: Path
) -> None:
    server.responder = InvoiceFix("openai")
    proc, workdir = run(server, tmp_path, "--max-iterations", "1", model="openai:qwen-local")
    assert "max_cost_usd" in proc.stderr and "qwen-local" in proc.stderr
    assert any(e["event"] == "warning" for e in journal(workdir))


def test_plan_model_plans_and_act_model_acts(server: FakeProvider, tmp_path: Path) -> None:
    template = tmp_path / "planned.yaml"
    template.write_text(
        "looprun: 1\nname: planned_bugfix\ndescription: bugfix with a written plan\n"
        "extends: bugfix\nplan: {mode: model, max_tasks: 3, tasks: null}\n"
    )
    player = InvoiceFix("openai")
    server.responder = player
    proc, workdir = run(
        server,
        tmp_path,
        "--plan-model",
        "openai:gpt-4.1",
        "--max-iterations",
        "1",
        template=str(template),
    )
    summary = json.loads(proc.stdout)
    assert [t["id"] for t in summary["tasks"]] == ["reproduce", "fix"], proc.stderr
    assert player.models[0] == "gpt-4.1"
    assert set(player.models[1:]) == {"gpt-4o-mini"}
    (run_dir,) = (workdir / ".looprun" / "runs").iterdir()
    invocation = json.loads((run_dir / "run.json").read_text())
    assert invocation["models"] == {"act": "openai:gpt-4o-mini", "plan": "openai:gpt-4.1"}


def test_no_model_anywhere_is_a_usage_error_naming_the_options(tmp_path: Path) -> None:
    workdir = sample_copy("invoice", tmp_path)
    config = tmp_path / "empty.yaml"
    config.write_text("{}\n")
    proc = looprun(
        "bugfix", "--intent", INTENT, "--workdir", str(workdir), env={"LOOPRUN_CONFIG": str(config)}
    )
    assert proc.returncode == 2
    for option in ("--model", "LOOPRUN_MODEL", "config file", str(config), "default"):
        assert option in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (workdir / ".looprun").exists()


def test_a_cut_off_reply_is_reported_and_continued(server: FakeProvider, tmp_path: Path) -> None:
    player = InvoiceFix("anthropic", cut_off_first=True)
    server.responder = player
    proc, workdir = run(server, tmp_path, "--max-iterations", "1", model=MODELS["anthropic"])
    summary = json.loads(proc.stdout)
    assert summary["tasks"][0]["outcome"] == "done", proc.stderr
    finishes = [e for e in journal(workdir) if e["event"] == "model_finish"]
    assert [(f["finish"], f["detail"]) for f in finishes] == [("length", "max_tokens")]
    assert "cut off" in proc.stderr
    nudged = conversation(server.requests[1].json())
    assert "cut off at the output token limit" in nudged[-1].text
    assert player.problems == []


def test_a_refusal_stops_the_run_as_escalated(server: FakeProvider, tmp_path: Path) -> None:
    server.push(openai_reply(None, refusal="I can't help with modifying this code."))
    proc, workdir = run(server, tmp_path)
    assert proc.returncode == 5, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["code"] == "model_refusal"
    assert "refused" in summary["reason"] and "can't help" in summary["reason"]
    assert len(server.requests) == 1
    finishes = [e["finish"] for e in journal(workdir) if e["event"] == "model_finish"]
    assert finishes == ["refusal"]


def test_a_static_plan_does_not_need_the_plan_models_key(
    server: FakeProvider, tmp_path: Path
) -> None:
    server.responder = InvoiceFix("openai")
    hosted = {"ANTHROPIC_BASE_URL": "https://api.anthropic.com", "ANTHROPIC_API_KEY": ""}
    proc, _ = run(
        server,
        tmp_path,
        "--plan-model",
        "anthropic:claude-sonnet-4-5",
        "--max-iterations",
        "1",
        env=hosted,
        variants=3,  # asked of the act model, since the plan model has no key
    )
    assert proc.stdout, proc.stderr
    assert "held-out variants are asked of the act model" in proc.stderr
    assert json.loads(proc.stdout)["tasks"][0]["outcome"] == "done", proc.stderr
