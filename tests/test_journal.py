"""The run journal: durable events, atomic state, torn lines, redaction, run listing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest

from looprun.errors import UsageError
from looprun.journal.read import load_state, read_jsonl
from looprun.journal.runs import list_runs
from looprun.journal.writer import RunJournal
from looprun.system.atomic import write_atomic, write_atomic_at
from looprun.system.proc import run_process
from looprun.system.redact import Redactor
from looprun.system.resources import schemas_dir


@pytest.fixture
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads((schemas_dir() / "journal-event.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_events_are_numbered_and_valid(tmp_path: Path, validator) -> None:  # type: ignore[no-untyped-def]
    with RunJournal.create(tmp_path, "r1") as j:
        j.event("plan", mode="none", tasks=[{"id": "main", "goal": "g"}])
        j.event("run_finished", outcome="done", reason="ok", code="", iterations=1)
        events = j.events()
    assert [e["seq"] for e in events] == [1, 2]
    for e in events:
        validator.validate(e)
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({**events[1], "outcome": "finished"})  # not an outcome


def test_torn_last_line_is_skipped_then_cut(tmp_path: Path) -> None:
    with RunJournal.create(tmp_path, "r2") as j:
        j.event("resumed", iteration=0, task_index=0)
    path = tmp_path / ".looprun" / "runs" / "r2" / "journal.jsonl"
    with open(path, "a") as fh:
        fh.write('{"seq": 2, "event": "ite')
    assert [e["seq"] for e in read_jsonl(path)] == [1]
    with RunJournal.open(tmp_path, "r2") as j:
        j.event("resumed", iteration=1, task_index=0)
    lines = path.read_text().splitlines()
    assert [json.loads(line)["seq"] for line in lines] == [1, 2]


def test_state_is_replaced_atomically(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    write_atomic(target, '{"a": 1}')
    write_atomic(target, '{"a": 2}')
    assert json.loads(target.read_text()) == {"a": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]  # no temp file left


def test_a_copy_is_renewed_into_the_name_the_old_one_left(tmp_path: Path) -> None:
    """``vacate``: the old file goes first, so the rename replaces nothing (no ext4 flush);
    the new content arrives whole, the mode is kept, a link at the name is removed,
    never written through, and no temp file is left."""
    dfd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        write_atomic_at(dfd, "state.json", '{"a": 1}', sync="none", vacate=True)
        (tmp_path / "state.json").chmod(0o640)
        before = (tmp_path / "state.json").stat().st_ino
        write_atomic_at(dfd, "state.json", '{"a": 2}', sync="none", vacate=True)
        after = tmp_path / "state.json"
        assert json.loads(after.read_text()) == {"a": 2}
        assert after.stat().st_ino != before and after.stat().st_mode & 0o777 == 0o640
        (tmp_path / "elsewhere").write_text("keep")
        after.unlink()
        after.symlink_to(tmp_path / "elsewhere")
        write_atomic_at(dfd, "state.json", '{"a": 3}', sync="none", vacate=True)
        assert not after.is_symlink() and json.loads(after.read_text()) == {"a": 3}
        assert (tmp_path / "elsewhere").read_text() == "keep"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "state.json"]
        with pytest.raises(ValueError):  # a durable write never leaves the name empty
            write_atomic_at(dfd, "state.json", "{}", sync="content", vacate=True)
    finally:
        os.close(dfd)


def test_each_saved_state_renews_state_json_to_the_journal_record(tmp_path: Path) -> None:
    with RunJournal.create(tmp_path, "r9") as j:
        for n in range(3):
            j.save_state({"n": n, "journal_seq": j.seq})
            copy = json.loads((tmp_path / ".looprun" / "runs" / "r9" / "state.json").read_text())
            assert copy == {"n": n, "journal_seq": j.seq - 1}
            assert load_state(tmp_path / ".looprun" / "runs" / "r9") == copy


def test_redaction_reaches_every_file(tmp_path: Path) -> None:
    secret = "hunter2-but-longer"
    j = RunJournal(tmp_path / "run", "r", Redactor([secret]))
    with j:
        j.event(
            "tool_call",
            iteration=1,
            tool="run",
            arguments={"command": secret},
            is_error=False,
            changed=[],
            result=f"out {secret}",
        )
        j.exchange({"reply": {"content": secret}})
        j.save_state({"feedback": secret})
        j.save_observation(1, {"feedback": [secret]})
        j.save_summary({"reason": secret})
        j.save_invocation({"intent": secret})
    for p in (tmp_path / "run").rglob("*"):
        if p.is_file():
            assert secret not in p.read_text(), p


def test_list_runs_and_unknown_ids(tmp_path: Path) -> None:
    with RunJournal.create(tmp_path, "20250101-000000-aaaaaa") as j:
        j.save_invocation({"template": "/x/bugfix.yaml", "started": "2025"})
        j.save_state({"iterations": 2, "stop": {"outcome": "done"}})
        j.save_summary({"outcome": "done", "reason": "exit conditions hold"})
    with RunJournal.create(tmp_path, "20250102-000000-bbbbbb") as j:
        j.save_state({"iterations": 1, "stop": None})
    rows = list_runs(tmp_path)
    assert [(r.outcome, r.iterations) for r in rows] == [("done", 2), ("interrupted", 1)]
    with RunJournal.open(tmp_path, "20250102") as j:  # a unique prefix is enough
        assert j.run_id == "20250102-000000-bbbbbb"
    with pytest.raises(UsageError, match="no run"):
        RunJournal.open(tmp_path, "2025")  # ambiguous
    with pytest.raises(UsageError, match="not a run id"):
        RunJournal.open(tmp_path, "../x")


def _inode(path: Path) -> int:
    return path.stat().st_ino


def test_artifacts_are_renewed_only_when_a_command_may_have_reached_them(tmp_path: Path) -> None:
    with RunJournal.create(tmp_path, "r1") as j:
        j.fresh_artifacts()
        made = _inode(j.artifacts)
        j.fresh_artifacts()  # no command since, still empty: nothing could be in it
        assert _inode(j.artifacts) == made
        run_process(["true"], cwd=tmp_path, timeout_s=30)
        j.fresh_artifacts()  # a command ran: it may hold the old one open
        assert _inode(j.artifacts) != made
        (j.artifacts / "planted.txt").write_text("x")
        j.fresh_artifacts()  # not empty: renewed even with no command since
        assert list(j.artifacts.iterdir()) == []


def test_the_state_is_a_journal_record_valid_against_the_schema(
    tmp_path: Path,
    validator,  # type: ignore[no-untyped-def]
) -> None:
    with RunJournal.create(tmp_path, "r1") as j:
        j.event("plan", mode="none", tasks=[{"id": "main", "goal": "g"}])
        j.save_state({"iterations": 1, "journal_seq": j.seq})
        (record,) = [e for e in j.events() if e["event"] == "state"]
        validator.validate(record)
        assert record["state"] == {"iterations": 1, "journal_seq": 1} == j.load_state()
        assert [e["event"] for e in j.current_events()] == ["plan"]  # bookkeeping, no event
