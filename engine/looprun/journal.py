"""A run's durable record under ``.looprun/runs/<run_id>/``.

- ``journal.jsonl``: append-only events, each flushed and fsynced before the call returns
  (schema: ``schemas/journal-event.schema.json``); a torn last line is tolerated on read
  and cut off before appending again;
- ``state.json``: the resumable loop state, replaced atomically (temp file, fsync, rename);
- ``run.json``: how the run was invoked, so ``looprun resume`` can rebuild it;
- ``observe/<n>.json``: one structured observation per iteration;
- ``exchanges.jsonl``: the model exchanges; ``summary.json``: the result at the end.

Every string written is redacted first: values of secret-looking environment variables
never reach these files.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from looprun import safefs
from looprun.atomic import write_atomic
from looprun.errors import UsageError
from looprun.proc import secret_values
from looprun.redact import Redactor

RUNS_DIR = Path(safefs.STATE_DIR_NAME) / "runs"


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


# A value longer than this (a refused 12 MB write, a huge reply) is recorded in the event
# and exchange logs by its size and digest: the logs stay readable and bounded.
MAX_RECORDED_CHARS = 64_000


def bounded(obj: Any) -> Any:
    """``obj`` with every string over :data:`MAX_RECORDED_CHARS` replaced by its size and
    SHA-256 (of its UTF-8 bytes)."""
    if isinstance(obj, str):
        if len(obj) <= MAX_RECORDED_CHARS:
            return obj
        digest = hashlib.sha256(obj.encode("utf-8", "surrogatepass")).hexdigest()
        return f"[{len(obj)} characters, sha256:{digest}; too long to record]"
    if isinstance(obj, Mapping):
        return {k: bounded(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [bounded(v) for v in obj]
    return obj


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=False, default=str)


def _repair_tail(path: Path) -> int:
    """Cut a torn last line (a crash mid-write); return the last complete event's seq."""
    data = safefs.read_bytes(path)
    if data is None:
        return 0
    end = data.rfind(b"\n") + 1
    if end < len(data):
        with os.fdopen(safefs.open_file(path, os.O_RDWR), "r+b") as fh:
            fh.truncate(end)
            fh.flush()
            os.fsync(fh.fileno())
    last = 0
    for line in data[:end].splitlines()[-1:]:
        try:
            last = int(json.loads(line).get("seq", 0))
        except (ValueError, AttributeError):
            last = 0
    return last


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Events of a JSONL file; a torn or garbled line is skipped, never fatal."""
    try:
        fd = safefs.open_file(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    with open(fd, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                yield obj


class RunJournal:
    """The files of one run. Implements the loop's Journal port."""

    def __init__(self, run_dir: Path, run_id: str, redactor: Redactor | None = None):
        self.dir = run_dir
        self.run_id = run_id
        self.redact = redactor or Redactor(secret_values())
        for sub in ("observe", "artifacts"):
            os.close(safefs.open_dir(self.dir / sub, create=True))
        self._events_path = self.dir / "journal.jsonl"
        self._seq = _repair_tail(self._events_path)
        self._events = _append_handle(self._events_path)
        self._exchanges = _append_handle(self.dir / "exchanges.jsonl")

    @classmethod
    def create(cls, workdir: Path, run_id: str | None = None) -> RunJournal:
        rid = run_id or new_run_id()
        runs = safefs.state_dir(workdir) / "runs"
        with safefs.opened_dir(runs, create=True) as fd:
            try:
                os.mkdir(rid, 0o700, dir_fd=fd)
            except FileExistsError:
                raise UsageError(f"run {rid} already exists in {runs}") from None
        return cls(runs / rid, rid)

    @classmethod
    def open(cls, workdir: Path, run_id: str) -> RunJournal:
        path = find_run(workdir, run_id)
        return cls(path, path.name)

    @property
    def seq(self) -> int:
        """The seq of the last event written (0 before the first)."""
        return self._seq

    @property
    def artifacts(self) -> Path:
        return self.dir / "artifacts"

    def close(self) -> None:
        for fh in (self._events, self._exchanges):
            if not fh.closed:
                fh.close()

    def __enter__(self) -> RunJournal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _append(self, fh: Any, obj: Mapping[str, Any]) -> None:
        fh.write(_dumps(self.redact.data(bounded(obj))) + "\n")
        fh.flush()
        os.fsync(fh.fileno())

    # -- the Journal port -------------------------------------------------------------------

    def event(self, kind: str, **data: Any) -> None:
        self._seq += 1
        record = {
            "seq": self._seq,
            "ts": round(time.time(), 3),
            "run_id": self.run_id,
            "event": kind,
            **data,
        }
        self._append(self._events, record)

    def exchange(self, record: Mapping[str, Any]) -> None:
        self._append(self._exchanges, {"ts": round(time.time(), 3), **record})

    def save_state(self, state: Mapping[str, Any]) -> None:
        write_atomic(self.dir / "state.json", _dumps(self.redact.data(state)), nofollow=True)

    def save_observation(self, number: int, record: Mapping[str, Any]) -> None:
        self._save(Path("observe") / f"{number}.json", record)
        self._keep_artifacts(number)

    def _keep_artifacts(self, number: int) -> None:
        """Copy what the observers wrote this iteration (reports, output logs) to
        ``artifacts/<n>/``: the next iteration overwrites ``artifacts/`` itself, which
        templates name as ``run.artifacts``."""
        files = [p for p in self.artifacts.iterdir() if p.is_file() and not p.is_symlink()]
        if not files:
            return
        keep = self.artifacts / str(number)
        keep.mkdir(exist_ok=True)
        for path in files:
            shutil.copyfile(path, keep / path.name)

    def save_summary(self, summary: Mapping[str, Any]) -> None:
        self._save(Path("summary.json"), summary)

    def save_invocation(self, invocation: Mapping[str, Any]) -> None:
        self._save(Path("run.json"), invocation)

    def _save(self, name: Path, record: Mapping[str, Any]) -> None:
        text = json.dumps(self.redact.data(record), indent=2, ensure_ascii=False, default=str)
        write_atomic(self.dir / name, text, nofollow=True)

    # -- reading back ---------------------------------------------------------------------

    def events(self) -> list[dict[str, Any]]:
        return list(read_jsonl(self._events_path))

    def current_events(self) -> list[dict[str, Any]]:
        """The events without the superseded ones (see :func:`current_events`)."""
        return current_events(self.events())

    def load_state(self) -> dict[str, Any] | None:
        return _load_json(self.dir / "state.json")

    def load_invocation(self) -> dict[str, Any]:
        data = _load_json(self.dir / "run.json")
        if data is None:
            raise UsageError(f"{self.dir}: run.json is missing or unreadable; cannot resume")
        return data


# Events that describe a step; when the step is redone after a resume they are superseded.
STEP_EVENTS = frozenset(
    {
        "plan",
        "tool_call",
        "policy_violation",
        "limit",
        "iteration",
        "task_done",
        "approval",
        "model_finish",
        "context_trimmed",
    }
)


def current_events(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The journal as the run's state sees it: step events that a later ``resumed``
    event marks superseded (written after the last saved state, so redone) are left out;
    the raw journal keeps them, append-only."""
    events = [dict(e) for e in events]
    gone: list[tuple[int, int]] = []
    for e in events:
        span = e.get("superseded") if e.get("event") == "resumed" else None
        if isinstance(span, Mapping):
            gone.append((int(span.get("from_seq", 0)), int(span.get("to_seq", -1))))
    return [
        e
        for e in events
        if not (
            e.get("event") in STEP_EVENTS
            and any(lo <= int(e.get("seq", 0)) <= hi for lo, hi in gone)
        )
    ]


def _append_handle(path: Path) -> Any:
    fd = safefs.open_file(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    return os.fdopen(fd, "a", encoding="utf-8")


def _load_json(path: Path) -> dict[str, Any] | None:
    try:
        raw = safefs.read_bytes(path)
        data = json.loads(raw.decode("utf-8")) if raw is not None else None
    except (OSError, ValueError, safefs.UnsafePathError):
        return None
    return data if isinstance(data, dict) else None


def runs_root(workdir: Path) -> Path:
    """Where the runs of ``workdir`` are kept (``looprun runs`` prints it)."""
    return Path(os.path.realpath(workdir)) / RUNS_DIR


def _run_dirs(root: Path) -> list[Path]:
    """The run directories under ``root``; links and files there are no runs."""
    if not safefs.is_real_dir(root.parent) or not safefs.is_real_dir(root):
        return []
    return sorted(p for p in root.iterdir() if safefs.is_real_dir(p))


def find_run(workdir: Path, run_id: str) -> Path:
    root = runs_root(workdir)
    if not run_id or "/" in run_id or run_id.startswith("."):
        raise UsageError(f"not a run id: {run_id!r}")
    path = root / run_id
    if not safefs.is_real_dir(path) or not safefs.is_real_dir(root):
        matches = [p for p in _run_dirs(root) if p.name.startswith(run_id)]
        if len(matches) != 1:
            raise UsageError(f"no run {run_id!r} under {root} (see `looprun runs`)")
        path = matches[0]
    return path


@dataclass(frozen=True)
class RunInfoRow:
    """One row of ``looprun runs``: a run and how it ended."""

    run_id: str
    template: str
    started: str
    outcome: str
    iterations: int
    reason: str
    duration_s: float = 0.0
    tokens: int = 0
    cost_usd: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def list_runs(workdir: Path) -> list[RunInfoRow]:
    """Every run under ``workdir/.looprun/runs``, oldest first, with its outcome so far."""
    rows = []
    for d in _run_dirs(runs_root(workdir)):
        inv = _load_json(d / "run.json") or {}
        summary = _load_json(d / "summary.json")
        state = _load_json(d / "state.json") or {}
        stop = state.get("stop") or {}
        if summary is not None and stop:
            outcome, reason = summary.get("outcome", "?"), summary.get("reason", "")
        elif state.get("pending"):
            outcome, reason = "escalated", "waiting for approval"
        elif (
            summary is not None
            and summary.get("outcome") == "interrupted"
            and summary.get("iterations") == state.get("iterations")  # not a later crash
        ):
            outcome, reason = "interrupted", str(summary.get("reason", ""))
        else:
            outcome, reason = "interrupted", "no outcome recorded (resume it)"
        usage = (summary or {}).get("usage") or {}
        tokens = int(usage.get("prompt_tokens", state.get("prompt_tokens", 0)) or 0) + int(
            usage.get("completion_tokens", state.get("completion_tokens", 0)) or 0
        )
        rows.append(
            RunInfoRow(
                d.name,
                str(inv.get("template", "?")),
                str(inv.get("started", "")),
                outcome,
                int(state.get("iterations", 0)),
                reason,
                round(float((summary or {}).get("duration_s", state.get("elapsed_s", 0)) or 0), 3),
                tokens,
                round(float(usage.get("cost_usd", state.get("cost_usd", 0.0)) or 0.0), 6),
            )
        )
    return rows
