"""One act turn of 1,000 tool calls on a real git work tree, with the context budget.

Once the turn outgrows ``context.budget_tokens``, every request must still carry the
system prompt, the act prompt with the task, and the answer to the model's latest call
(the latest round is cut, never dropped), within the budget and well-formed: every kept
call has its result. Checked with the scripted model and with the real OpenAI client
against the loopback server.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from loop_helpers import Rig, make_template
from tests.support.fake_provider import Canned, FakeProvider, Recorded, openai_reply

from looprun.journal.writer import RunJournal
from looprun.loop.context import ContextBudget
from looprun.loop.engine import RunInfo, run_loop
from looprun.loop.outcome import RunResult
from looprun.models.base import Message, Reply, ToolSpec, Unscripted
from looprun.models.config import Config
from looprun.models.http import RetryPolicy
from looprun.models.registry import resolve_model
from looprun.models.scripted import ScriptedModel
from looprun.template.model import Limits

STEPS = 1_000
BUDGET = 2_000
INTENT = "keep a numbered note for every step"


def note(n: int) -> dict[str, Any]:
    return {"name": "write_file", "arguments": {"path": f"notes/n{n}.txt", "content": f"{n}\n"}}


def problems(messages: Sequence[dict[str, Any]], calls_made: int) -> list[str]:
    """What is wrong with one request (as role/content/tool ids), [] when it is right."""
    out = []
    if not messages or messages[0]["role"] != "system":
        out.append("no system message first")
    if not any(m["role"] == "user" and f"Task: {INTENT}" in m["content"] for m in messages):
        out.append("the task is missing")
    if calls_made:
        last = messages[-1]
        want = f"created notes/n{calls_made - 1}.txt"
        if last["role"] != "tool" or not last["content"].startswith(want):
            out.append(f"the latest tool result ({want}) is missing: last is {last}")
    open_calls: set[str] = set()
    for m in messages:
        if m["role"] == "assistant":
            if open_calls:
                out.append(f"calls without results: {sorted(open_calls)}")
            open_calls = set(m["calls"])
        elif m["role"] == "tool":
            if m["id"] not in open_calls:
                out.append(f"orphaned result {m['id']}")
            open_calls.discard(m["id"])
    return out


def run_turn(rig: Rig, model: Any, budget: ContextBudget) -> RunResult:
    template = make_template(limits=Limits(max_iterations=1))
    assert template.act is not None
    template = replace(template, act=replace(template.act, max_steps=STEPS))
    journal = RunJournal.create(rig.workdir)
    ports = replace(rig.ports(model, journal, template), context=budget)
    info = RunInfo(journal.run_id, str(journal.dir), str(journal.artifacts), str(rig.workdir))
    try:
        return run_loop(template, ports, inputs={"intent": INTENT}, run=info)
    finally:
        journal.close()


class Checked(Unscripted):
    """The scripted model, checking every request it receives as it arrives."""

    def __init__(self, turns: list[dict[str, Any]], budget: ContextBudget):
        self.inner = ScriptedModel(turns)
        self.ref = self.inner.ref
        self.budget = budget
        self.requests = 0

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec], **kw: Any) -> Reply:
        simple = [
            {
                "role": m.role,
                "content": m.content,
                "calls": [c.id for c in m.tool_calls],
                "id": m.tool_call_id,
            }
            for m in messages
        ]
        found = problems(simple, self.requests)
        assert not found, f"request {self.requests + 1}: {found}"
        assert self.budget.estimate(messages) <= self.budget.budget_tokens
        self.requests += 1
        return self.inner.complete(messages, tools, **kw)


def test_every_request_of_a_thousand_call_turn_keeps_task_and_latest_result(rig: Rig) -> None:
    budget = ContextBudget(BUDGET, recent_rounds=3)
    model = Checked([{"tool_calls": [note(n)]} for n in range(STEPS)], budget)
    result = run_turn(rig, model, budget)
    assert model.requests == STEPS
    assert result.iterations == 1
    assert (rig.workdir / "notes" / f"n{STEPS - 1}.txt").read_text() == f"{STEPS - 1}\n"


def test_over_http_every_request_keeps_task_and_latest_result(rig: Rig) -> None:
    found: list[str] = []
    counter = itertools.count()

    def answer(request: Recorded) -> Canned:
        n = next(counter)
        said = []
        for m in request.json()["messages"]:
            calls = [c["id"] for c in m.get("tool_calls") or []]
            said.append(
                {
                    "role": m["role"],
                    "content": m.get("content") or "",
                    "calls": calls,
                    "id": m.get("tool_call_id"),
                }
            )
        wrong = problems(said, n)
        if wrong:  # end the turn at once: the test reports the first bad request
            found.append(f"request {n + 1}: {wrong}")
            return openai_reply("giving up", prompt_tokens=len(request.body) // 4)
        name_args = (note(n)["name"], note(n)["arguments"])
        return openai_reply(tool_calls=[name_args], prompt_tokens=len(request.body) // 4)

    with FakeProvider(answer) as server:
        model = resolve_model(
            "openai:gpt-4o-mini",
            base_url=server.openai_url,
            config=Config(retry=RetryPolicy(timeout_s=10, backoff_base_s=0.01)),
            env={},
        )
        budget = ContextBudget(BUDGET, recent_rounds=3)
        run_turn(rig, model, budget)
        assert found == []
        assert len(server.requests) == STEPS
        last = json.loads(server.requests[-1].body)
        assert budget.estimate([Message("user", json.dumps(last["messages"]))]) < 4 * BUDGET
