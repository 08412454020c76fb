"""``exchanges.jsonl`` writes each message once: every request can be rebuilt exactly from
the log, and a long act turn does not write its conversation again on every call."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from loop_helpers import Rig, make_template, rule

from looprun.journal.writer import RunJournal
from looprun.loop.engine import RunInfo, run_loop
from looprun.loop.state import message_to_dict
from looprun.models.scripted import ScriptedModel
from looprun.template.model import Limits

STEPS = 60


def note(n: int) -> dict[str, Any]:
    return {"name": "write_file", "arguments": {"path": f"notes/n{n}.txt", "content": f"{n}\n"}}


def rebuilt(lines: list[str]) -> list[list[dict[str, Any]]]:
    """Each request as the model got it, from the log alone."""
    previous: dict[str, list[dict[str, Any]]] = {}
    requests = []
    for line in lines:
        record = json.loads(line)
        request: list[dict[str, Any]] = []
        for item in record["request"]:
            if "same" in item:
                first, last = item["same"]
                request += previous[record["log"]][first : last + 1]
            else:
                request.append(item)
        previous[record["log"]] = request
        requests.append(request)
    return requests


def test_requests_rebuild_exactly_and_each_message_is_written_once(rig: Rig) -> None:
    template = make_template(limits=Limits(max_iterations=2), refine=[rule(None, "retry", "again")])
    assert template.act is not None
    template = replace(template, act=replace(template.act, max_steps=STEPS + 1))
    turns = [{"tool_calls": [note(n)]} for n in range(STEPS)] + [{"text": "done"}]
    model = ScriptedModel(turns * 2)
    journal = RunJournal.create(rig.workdir)
    ports = rig.ports(model, journal, template)
    info = RunInfo(journal.run_id, str(journal.dir), str(journal.artifacts), str(rig.workdir))
    try:
        run_loop(template, ports, inputs={"intent": "notes"}, run=info)
    finally:
        journal.close()
    lines = (journal.dir / "exchanges.jsonl").read_text().splitlines()
    sent = [[message_to_dict(m) for m in messages] for _, messages in model.calls]
    assert len(lines) == len(sent) == 2 * (STEPS + 1)
    assert rebuilt(lines) == sent
    # the conversation grows by two messages a call; the log by about that much
    full = [sum(1 for item in json.loads(line)["request"] if "same" not in item) for line in lines]
    assert max(full[2:STEPS]) <= 2, full
    assert lines[STEPS].count("created notes/n1.txt") == 0  # said once, long before
