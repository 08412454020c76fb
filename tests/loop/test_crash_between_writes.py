"""A crash after an iteration's journal event but before ``state.json`` is saved: resume
redoes that iteration once, and the journal marks the first record of it superseded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from loop_helpers import FINISHED, Rig, make_template, write

from looprun.journal.read import current_events
from looprun.journal.writer import MAX_RECORDED_CHARS, RunJournal
from looprun.loop.state import LoopState
from looprun.models.scripted import ScriptedModel
from looprun.system.resources import schemas_dir
from looprun.template.model import Limits


class Killed(BaseException):
    """Stands for kill -9: nothing after it runs, nothing is cleaned up."""


class CrashAfterEvent:
    """The real journal, dying at the first ``save_state`` after an ``iteration`` event."""

    def __init__(self, inner: RunJournal, iteration: int):
        self.inner, self.iteration, self.armed = inner, iteration, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def seq(self) -> int:
        return self.inner.seq

    def event(self, kind: str, **data: Any) -> None:
        self.inner.event(kind, **data)
        if kind == "iteration" and data.get("iteration") == self.iteration:
            self.armed = True

    def save_state(self, state: Any) -> None:
        if self.armed:
            raise Killed()
        self.inner.save_state(state)


TURNS = [write("worse"), FINISHED, write("good"), FINISHED]


@pytest.mark.parametrize("crash_at", [1, 2])
def test_journal_and_state_agree_after_a_crash_between_the_writes(rig: Rig, crash_at: int) -> None:
    template = make_template()
    journal = RunJournal.create(rig.workdir)
    run_id = journal.run_id
    with pytest.raises(Killed):
        rig.run(template, TURNS, journal=CrashAfterEvent(journal, crash_at))  # type: ignore[arg-type]
    assert [e["iteration"] for e in journal.events() if e["event"] == "iteration"] == list(
        range(1, crash_at + 1)
    )
    saved = journal.load_state()
    assert saved is not None and saved["iterations"] == crash_at - 1  # the state is behind

    resumed = RunJournal.open(rig.workdir, run_id)
    state = LoopState.from_dict(resumed.load_state() or {})
    model = ScriptedModel(TURNS)
    result = rig.run(template, TURNS, journal=resumed, state=state, model=model)
    assert result.outcome == "done" and result.iterations == 2
    assert rig.read().strip() == "good"

    raw = RunJournal.open(rig.workdir, run_id).events()
    raw_iterations = [e["iteration"] for e in raw if e["event"] == "iteration"]
    assert raw_iterations.count(crash_at) == 2  # append-only: the first record stays ...
    current = current_events(raw)
    assert [e["iteration"] for e in current if e["event"] == "iteration"] == [1, 2]  # ... once
    (mark,) = [e for e in raw if e["event"] == "resumed"]
    first = next(e for e in raw if e["event"] == "iteration" and e["iteration"] == crash_at)
    assert mark["superseded"]["from_seq"] <= first["seq"] <= mark["superseded"]["to_seq"]
    # each tool call of the redone iteration is also counted once
    tools = [e for e in current if e["event"] == "tool_call"]
    assert len(tools) == 2
    schema = json.loads((Path(schemas_dir()) / "journal-event.schema.json").read_text())
    jsonschema.validate(mark, schema)


def test_the_saved_state_covers_every_event_written_before_it(rig: Rig) -> None:
    template = make_template(limits=Limits(max_iterations=4, max_repeats=None))
    journal = RunJournal.create(rig.workdir)
    run_id = journal.run_id
    first = rig.run(template, [FINISHED], journal=journal)  # no edit: retries until the cap
    assert first.outcome == "exhausted"
    reopened = RunJournal.open(rig.workdir, run_id)
    state = LoopState.from_dict(reopened.load_state() or {})
    # the final save, its journal record, then run_finished, the last event
    events = reopened.events()
    assert [e["event"] for e in events[-2:]] == ["state", "run_finished"]
    assert state.journal_seq == reopened.seq - 2
    assert events[-2]["state"] == state.to_dict()


def _saves(rig: Rig, iterations: int) -> RunJournal:
    template = make_template(limits=Limits(max_iterations=iterations, max_repeats=None))
    journal = RunJournal.create(rig.workdir)
    assert rig.run(template, [FINISHED], journal=journal).outcome == "exhausted"
    return RunJournal.open(rig.workdir, journal.run_id)


@pytest.mark.parametrize("damage", ["missing", "torn", "older"])
def test_the_journal_record_stands_in_for_a_missing_torn_or_older_state_json(
    rig: Rig, damage: str
) -> None:
    journal = _saves(rig, 3)
    records = [e["state"] for e in journal.events() if e["event"] == "state"]
    last = records[-1]
    assert journal.load_state() == last  # the copy, as new as the record
    copy = journal.dir / "state.json"
    if damage == "missing":
        copy.unlink()
    elif damage == "torn":  # a machine crash: the rename reached the disk, the content not
        copy.write_text(copy.read_text()[:40])
    else:  # the process died between the journal's fsync and the copy's rename
        copy.write_text(json.dumps(records[-2]))
    assert journal.load_state() == last
    assert LoopState.from_dict(last).iterations == 3


def test_a_state_too_big_for_every_step_s_record_is_saved_as_state_json_alone(
    rig: Rig,
) -> None:
    journal = _saves(rig, 1)
    big = {**(journal.load_state() or {}), "note": "x" * (MAX_RECORDED_CHARS + 1)}
    big["journal_seq"] = journal.seq
    journal.save_state(big)
    assert [e["event"] for e in journal.events()][-1] != "state"  # the journal stays small
    assert RunJournal.open(rig.workdir, journal.run_id).load_state() == big


def test_the_record_is_found_past_a_long_tail_and_a_torn_last_line(rig: Rig) -> None:
    journal = _saves(rig, 2)
    (journal.dir / "state.json").unlink()
    want = journal.load_state()
    assert want is not None and want["iterations"] == 2
    with (journal.dir / "journal.jsonl").open("a") as fh:
        for n in range(2000):  # events after the save: the record is far from the end
            fh.write(json.dumps({"seq": 100 + n, "event": "warning", "message": "x" * 80}))
            fh.write("\n")
        fh.write('{"seq": 9999, "event": "state", "state": {"iterat')  # torn
    assert journal.load_state() == want
