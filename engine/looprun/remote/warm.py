"""Warm workers: long-lived Ray actors that run sub-loop jobs one at a time.

A Ray task starts in a worker process of the driver's own Ray job, so every run paid for
fresh processes importing looprun, and every sub-loop for a clone of the remote. A warm
worker is a detached actor (it outlives the run that made it, in the namespace
``looprun``, named after the looprun version): it imports looprun once, keeps a clone
per remote (``clones``) and gives each job a fresh repository, a fresh scratch
directory and nothing else of earlier jobs. Everything a job decides from (its keys,
allow-list, sandbox) is read again from the node's environment per job, as before.

An idle worker ends itself after ``LOOPRUN_RAY_WARM_IDLE_S`` (default 600 s), giving its
CPU back to the cluster. A worker whose run's board stays gone (the driver died) ends:
a detached actor is not ended with its driver as a task is. A board lost alone (the
process hosting it died) is replaced by its living driver, and its workers go on.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, NoReturn

from looprun import __version__
from looprun.remote.clones import CloneCache
from looprun.remote.worker import run_remote_job

NAMESPACE = "looprun"
PREFIX = f"warm-{__version__}-"
IDLE_S = "LOOPRUN_RAY_WARM_IDLE_S"
BOARD_GRACE_S = 10.0  # a lost board not replaced within this time: its driver died
_ACTORS: dict[int, Any] = {}


class WarmWorker:
    """One long-lived worker: ``execute`` runs one job at a time; ``idle`` and ``take``
    (its progress lines) answer while it runs (the actor is threaded for them). The
    run's board carries only the stop flag, and its fate."""

    def __init__(self) -> None:
        self._scratch = Path(tempfile.mkdtemp(prefix="looprun-warm-"))
        self._clones = CloneCache(self._scratch / "clones")
        self._lock = threading.Lock()
        self._busy = False
        self._closing = False
        self._last = time.monotonic()
        self._lines: list[str] = []
        self._idle_s = float(os.environ.get(IDLE_S) or 600)
        self._board: Any = None  # the running job's run's board (replaced by ``rebind``)
        self._board_lost: float | None = None  # when it was first found gone
        threading.Thread(target=self._reaper, name="looprun-warm-idle", daemon=True).start()

    def idle(self) -> bool:
        with self._lock:
            return not self._busy and not self._closing

    def pid(self) -> int:
        return os.getpid()

    def take(self) -> list[str]:
        """The progress lines of the running (or just ended) job, taken once."""
        with self._lock:
            out, self._lines = self._lines, []
        return out

    def rebind(self, board: Any) -> None:
        """The run's new board, its first one lost (the process hosting it died)."""
        with self._lock:
            self._board, self._board_lost = board, None

    def _say(self, line: str) -> None:
        with self._lock:
            self._lines.append(line)

    def execute(self, job_json: str, board: Any) -> dict[str, Any]:
        """Run one job (see ``worker.run_remote_job``), or answer ``busy`` at once when
        another run's job got here first."""
        with self._lock:
            if self._busy or self._closing:
                return {"busy": True}
            self._busy = True
            self._lines = []
            self._board, self._board_lost = board, None
        try:
            return run_remote_job(
                job_json,
                self._say,
                self._stopped,
                scratch_root=str(self._scratch),
                clones=self._clones,
            )
        finally:
            with self._lock:
                self._busy = False
                self._last = time.monotonic()

    def _stopped(self) -> bool:
        """Whether the run asked its workers to stop. A board that stays gone for
        ``BOARD_GRACE_S`` means its driver died: the worker ends, with its job, as a
        task would with its owner (the job is resumed from its last pushed step). A
        living driver replaces a lost board within that time (``rebind``). A slow board
        is no stop."""
        board = self._board
        try:
            return bool(board.is_stopped.remote().future().result(timeout=30))
        except TimeoutError:
            return False
        except Exception:  # the board's actor died, with its run or alone
            with self._lock:
                if board is not self._board:  # replaced meanwhile
                    return False
                now = time.monotonic()
                if self._board_lost is None:
                    self._board_lost = now
                if now - self._board_lost < BOARD_GRACE_S:
                    return False
            self._end(1)

    def _end(self, code: int) -> NoReturn:
        shutil.rmtree(self._scratch, ignore_errors=True)
        os._exit(code)  # Ray sees the actor end; a detached one is not restarted

    def _reaper(self) -> None:
        while True:
            time.sleep(min(30.0, max(self._idle_s / 4, 0.5)))
            with self._lock:
                if self._busy or time.monotonic() - self._last < self._idle_s:
                    continue
                self._closing = True
            self._end(0)


def actor_class(ray: Any) -> Any:
    """``WarmWorker`` as a Ray actor class (made once per ``ray`` module)."""
    if id(ray) not in _ACTORS:
        options = {"num_cpus": 1, "max_restarts": 0, "max_concurrency": 4}
        _ACTORS[id(ray)] = ray.remote(**options)(WarmWorker)
    return _ACTORS[id(ray)]


class WarmPool:
    """The driver's side: finds an idle warm worker of this looprun version, or makes
    one. Workers are shared by every run on the cluster; one a run holds is not lent
    again by it, and one another run holds answers ``busy`` (the job is then sent on)."""

    def __init__(self, ray: Any):
        self._ray = ray
        self._lock = threading.Lock()
        self._held: set[str] = set()
        self._dead: set[str] = set()

    def acquire(self) -> tuple[str, Any]:
        """(name, handle) of a worker this run now holds."""
        ray = self._ray
        with self._lock:
            names = [n for n in self._names() if n not in self._held and n not in self._dead]
            handles = {n: ray.get_actor(n, namespace=NAMESPACE) for n in names}
        probes = {n: h.idle.remote() for n, h in handles.items()}
        for name, ref in probes.items():
            try:
                idle = ray.get(ref, timeout=5)
            except Exception:  # gone or stuck: not a candidate
                continue
            with self._lock:
                if idle and name not in self._held:
                    self._held.add(name)
                    return name, handles[name]
        name = PREFIX + uuid.uuid4().hex[:12]
        handle = (
            actor_class(ray).options(name=name, namespace=NAMESPACE, lifetime="detached").remote()
        )
        with self._lock:
            self._held.add(name)
        return name, handle

    def release(self, name: str) -> None:
        with self._lock:
            self._held.discard(name)

    def kill(self, name: str, handle: Any) -> None:
        """End a worker for good (force-stop, watchdog, or it was lost)."""
        with self._lock:
            self._held.discard(name)
            self._dead.add(name)
        with contextlib.suppress(Exception):  # already gone
            self._ray.kill(handle, no_restart=True)

    def _names(self) -> list[str]:
        rows = self._ray.util.list_named_actors(all_namespaces=True)
        return sorted(
            r["name"]
            for r in rows
            if r.get("namespace") == NAMESPACE and r.get("name", "").startswith(PREFIX)
        )
