"""A run's durable record under ``.looprun/runs/<run_id>/``.

- ``journal.jsonl``: append-only events, each flushed before the call returns (schema:
  ``schemas/journal-event.schema.json``); a torn last line is tolerated on read and cut
  off before appending again;
- ``state.json``: a copy of the resumable loop state, never half written (temp file,
  rename into the name the old copy left) and not fsynced: each saved state is first a
  ``state`` record in the journal, which readers take while the copy is missing;
- ``run.json``: how the run was invoked, so ``looprun resume`` can rebuild it;
- ``observe/<n>.json``: one structured observation per iteration;
- ``exchanges.jsonl``: the model exchanges; ``summary.json``: the result at the end.

A killed process loses nothing: every write reaches the operating system before the call
returns. For a machine crash, saving the state is the durable point, at one fsync per
step: the state is appended to the journal as a ``state`` record after the events it has
seen, and the journal is fsynced; ``state.json`` is then renewed without an fsync, and
reading the state (:func:`looprun.journal.read.load_state`) takes the last record when
the copy is missing, torn or older. A machine crash may so lose the last step (a resumed
run redoes it, as after a kill before the save) and the OS-buffered tail of the exchanges
and observations; both are fsynced when the journal closes.

Every string written is redacted first: values of secret-looking environment variables
never reach these files.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from looprun.data.usage import UnsavedUsage
from looprun.errors import UsageError
from looprun.journal.read import STATE_EVENT, current_events, load_json, read_jsonl
from looprun.journal.read import load_state as load_run_state
from looprun.journal.runs import find_run, new_run_id
from looprun.system import safefs
from looprun.system.atomic import write_atomic, write_atomic_at
from looprun.system.crashpoint import crash_point
from looprun.system.proc import secret_values, spawned
from looprun.system.redact import Redactor

# A value longer than this (a refused 12 MB write, a huge reply) is recorded in the event
# and exchange logs by its size and digest: the logs stay readable and bounded.
MAX_RECORDED_CHARS = 64_000
# A kept artifact is cut at this size: a command cannot fill the disk through the copies.
MAX_KEPT_BYTES = 16 * 1024 * 1024


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


def _repair_tail(path: Path) -> bytes:
    """Cut a torn last line (a crash mid-write); return the complete lines."""
    data = safefs.read_bytes(path)
    if data is None:
        return b""
    end = data.rfind(b"\n") + 1
    if end < len(data):
        with os.fdopen(safefs.open_file(path, os.O_RDWR), "r+b") as fh:
            fh.truncate(end)
            fh.flush()
            os.fsync(fh.fileno())
    return data[:end]


def _last_seq(data: bytes) -> int:
    for line in data.splitlines()[-1:]:
        try:
            return int(json.loads(line).get("seq", 0))
        except (ValueError, AttributeError):
            return 0
    return 0


def _read_planted(dir_fd: int, name: str) -> bytes | None:
    """The first :data:`MAX_KEPT_BYTES` of regular file ``name`` in ``dir_fd`` (with a
    note when cut), or None for anything else: a link, a FIFO, a device, a directory."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fd).st_size
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = fh.read(MAX_KEPT_BYTES)
    if size > MAX_KEPT_BYTES:
        data += f"\n[cut: {size} bytes, only the first {MAX_KEPT_BYTES} kept]\n".encode()
    return data


def _write_durably(fh: Any, text: str) -> None:
    fh.write(text)
    fh.flush()
    os.fsync(fh.fileno())


# The events that say where they ran: a run's start or resumption, and each step.
_WHERE = frozenset({"run_started", "resumed", "iteration"})
_HOST = os.uname().nodename  # socket.gethostname()'s answer, without loading socket


class RunJournal:
    """The files of one run. Implements the loop's Journal port."""

    def __init__(self, run_dir: Path, run_id: str, redactor: Redactor | None = None):
        self.dir = run_dir
        self.run_id = run_id
        self.redact = redactor or Redactor(secret_values())
        # held for the run: each step's writes open no directory walk from ``/``
        self._dfd = safefs.open_dir(self.dir, create=True)
        self._observe_fd = safefs.open_dir(self.dir / "observe", create=True)
        os.close(safefs.open_dir(self.dir / "artifacts", create=True))
        self._kept_fd: int | None = None
        # the ``artifacts/`` this journal made and the command count then (see fresh_artifacts)
        self._fresh: tuple[int, int, int] | None = None
        self._events_path = self.dir / "journal.jsonl"
        self._seq = _last_seq(_repair_tail(self._events_path))
        self._exchanges_path = self.dir / "exchanges.jsonl"
        self._exchange_count = _repair_tail(self._exchanges_path).count(b"\n")
        # what earlier processes wrote: the usage a state saved before it does not hold
        self._opened = (self._seq, self._exchange_count)
        self._events = _append_handle(self._events_path)
        self._exchanges = _append_handle(self._exchanges_path)
        self._unsynced: set[int] = set()  # descriptors written since their last fsync

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
    def exchange_count(self) -> int:
        """How many model exchanges ``exchanges.jsonl`` holds."""
        return self._exchange_count

    @property
    def artifacts(self) -> Path:
        return self.dir / "artifacts"

    @property
    def kept(self) -> Path:
        """Where each iteration's artifacts are kept (``kept/<n>/``), out of commands' reach."""
        return self.dir / "kept"

    def close(self) -> None:
        for fh in (self._events, self._exchanges):
            if not fh.closed:
                self._sync(fh)
                fh.close()
        for name in ("_observe_fd", "_kept_fd", "_dfd"):
            fd = getattr(self, name)
            if fd is not None:
                os.close(fd)
                setattr(self, name, None)

    def __enter__(self) -> RunJournal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _append(self, fh: Any, obj: Mapping[str, Any], point: str) -> None:
        self._write_line(fh, _dumps(self.redact.data(bounded(obj))) + "\n", point)

    def _write_line(self, fh: Any, line: str, point: str) -> None:
        crash_point(f"torn:{point}", lambda: _write_durably(fh, line[: len(line) // 2]))
        fh.write(line)
        fh.flush()
        self._unsynced.add(fh.fileno())
        crash_point(f"after:{point}")

    def _sync(self, fh: Any) -> None:
        if fh.fileno() in self._unsynced:
            os.fsync(fh.fileno())
            self._unsynced.discard(fh.fileno())

    # -- the Journal port -------------------------------------------------------------------

    def event(self, kind: str, **data: Any) -> None:
        self._append(self._events, self._record(kind, data), f"event:{kind}")

    def _record(self, kind: str, data: Mapping[str, Any]) -> dict[str, Any]:
        self._seq += 1
        record = {
            "seq": self._seq,
            "ts": round(time.time(), 3),
            "run_id": self.run_id,
            "event": kind,
            **data,
        }
        if kind in _WHERE:  # on a cluster, which node and process ran this step
            record |= {"host": _HOST, "pid": os.getpid()}
        crash_point(f"before:event:{kind}")
        return record

    def exchange(self, record: Mapping[str, Any]) -> None:
        self._append(self._exchanges, {"ts": round(time.time(), 3), **record}, "exchange")
        self._exchange_count += 1

    def save_state(self, state: Mapping[str, Any]) -> None:
        """Append the state to the journal after the events it has seen and fsync it (the
        one durable point of a step), then replace ``state.json``, a copy for readers.

        A state too big to repeat in the journal at every step (over
        :data:`MAX_RECORDED_CHARS`: a huge reply kept in the conversation) gets no
        record; ``state.json`` is then the durable copy, its content fsynced too."""
        crash_point("before:state")
        text = _dumps(self.redact.data(state))  # redacted and serialised once for both
        if len(text) > MAX_RECORDED_CHARS:
            self._sync(self._events)  # the events this state has seen, durable before it
            write_atomic_at(self._held(), "state.json", text, sync="content")
            crash_point("after:state")
            return
        head = _dumps(self.redact.data(self._record(STATE_EVENT, {})))
        self._write_line(self._events, f'{head[:-1]}, "state": {text}}}\n', "event:state")
        self._sync(self._events)
        # the record is the durable state; the copy is renamed into a free name
        write_atomic_at(self._held(), "state.json", text, sync="none", vacate=True)
        crash_point("after:state")

    def _held(self) -> int:
        if self._dfd is None:
            raise UsageError(f"{self.dir}: the run's journal is closed")
        return self._dfd

    def save_observation(self, number: int, record: Mapping[str, Any]) -> None:
        if self._observe_fd is None:
            raise UsageError(f"{self.dir}: the run's journal is closed")
        write_atomic_at(self._observe_fd, f"{number}.json", self._text(record), sync="none")
        self._keep_artifacts(number)

    def fresh_artifacts(self) -> None:
        """Start an iteration (or the baseline) with an empty ``artifacts/``: the old one,
        kept already in ``kept/<n>/``, is replaced by a new directory, so nothing a command
        left or planted in an earlier iteration is there for this one's commands.

        When no command has started since this journal made the directory and it is
        still empty, no command can hold it or have left anything in it: it stays."""
        dfd = self._held()
        if self._fresh is not None and self._fresh[2] == spawned():
            try:
                fd = os.open("artifacts", safefs.DIR_FLAGS, dir_fd=dfd)
            except OSError:
                fd = -1
            if fd >= 0:
                try:
                    st = os.fstat(fd)
                    if (st.st_dev, st.st_ino) == self._fresh[:2] and not os.listdir(fd):
                        return
                finally:
                    os.close(fd)
        safefs.renew_entry(dfd, "artifacts")
        st = os.stat("artifacts", dir_fd=dfd, follow_symlinks=False)
        self._fresh = (st.st_dev, st.st_ino, spawned())

    def _keep_artifacts(self, number: int) -> None:
        """Copy what the observers wrote this iteration (reports, output logs) to
        ``kept/<n>/``, redacted: the next iteration overwrites ``artifacts/`` itself, which
        templates name as ``run.artifacts``.

        ``artifacts/`` is where commands write, so anything in it may be planted: only
        regular files are read (no link followed, a FIFO never waited on), each up to
        :data:`MAX_KEPT_BYTES`; the copies go to a directory outside it (read-only to
        sandboxed commands), created from the run directory's descriptor with no-follow,
        exclusive opens."""
        src = safefs.open_dir_at(self._held(), "artifacts", self.artifacts)
        try:
            files = {name: data for name in sorted(os.listdir(src))
                     if (data := _read_planted(src, name)) is not None}  # fmt: skip
        finally:
            os.close(src)
        if not files:
            return
        if self._kept_fd is None:
            self._kept_fd = safefs.open_dir(self.kept, create=True)
        with safefs.opened_dir_at(self._kept_fd, str(number)) as dst:
            for name, data in files.items():
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=dst)  # a resumed run redoes an iteration
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                with os.fdopen(os.open(name, flags, 0o600, dir_fd=dst), "wb") as fh:
                    fh.write(self.redact.binary(data))

    def save_summary(self, summary: Mapping[str, Any]) -> None:
        """The result, whole after a machine crash but without a directory fsync: the
        saved state is the run's truth, and a run whose summary is missing is one whose
        end ``looprun resume`` writes down again."""
        crash_point("before:summary")
        self._save(Path("summary.json"), summary, sync="content")

    def save_invocation(self, invocation: Mapping[str, Any]) -> None:
        self._save(Path("run.json"), invocation)

    def invocation_text(self, invocation: Mapping[str, Any]) -> str:
        """The text :meth:`save_invocation` writes for ``invocation`` (what is sealed)."""
        return self._text(invocation)

    def _text(self, record: Mapping[str, Any]) -> str:
        return json.dumps(self.redact.data(record), indent=2, ensure_ascii=False, default=str)

    def _save(self, name: Path, record: Mapping[str, Any], sync: str = "all") -> None:
        write_atomic(self.dir / name, self._text(record), nofollow=True, sync=sync)

    # -- reading back ---------------------------------------------------------------------

    def events(self) -> list[dict[str, Any]]:
        return list(read_jsonl(self._events_path))

    def current_events(self) -> list[dict[str, Any]]:
        """The events without the superseded ones (see :func:`current_events`)."""
        return current_events(self.events())

    def unsaved_usage(self, journal_seq: int, exchanges: int) -> UnsavedUsage:
        """What the model calls after a saved state cost, as recorded before this process
        opened the run (a killed iteration was paid for): tokens and cost from
        ``exchanges.jsonl`` past its first ``exchanges`` lines, and the time from the
        state's last event (``journal_seq``) to the last record written after it."""
        seq_at_open, count_at_open = self._opened
        prompt = completion = 0
        cost = 0.0
        stamps: list[float] = []
        for i, rec in enumerate(read_jsonl(self._exchanges_path)):
            if i >= count_at_open:
                break
            if i < exchanges:
                continue
            usage = rec.get("usage") or {}
            prompt += int(usage.get("prompt_tokens") or 0)
            completion += int(usage.get("completion_tokens") or 0)
            cost += float(usage.get("cost_usd") or 0.0)
            stamps.append(float(rec.get("ts") or 0.0))
        anchor: float | None = None
        for e in self.events():
            seq = int(e.get("seq", 0))
            if seq > seq_at_open:
                break
            if anchor is None and (seq == journal_seq or journal_seq == 0):
                anchor = float(e.get("ts") or 0.0)
            elif anchor is not None and seq > journal_seq and e.get("event") != STATE_EVENT:
                stamps.append(float(e.get("ts") or 0.0))
        seconds = max(0.0, max(stamps) - anchor) if stamps and anchor is not None else 0.0
        return UnsavedUsage(prompt, completion, cost, seconds)

    def load_state(self) -> dict[str, Any] | None:
        return load_run_state(self.dir)

    def load_invocation(self) -> dict[str, Any]:
        data = load_json(self.dir / "run.json")
        if data is None:
            raise UsageError(f"{self.dir}: run.json is missing or unreadable; cannot resume")
        return data


def _append_handle(path: Path) -> Any:
    fd = safefs.open_file(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    return os.fdopen(fd, "a", encoding="utf-8")
