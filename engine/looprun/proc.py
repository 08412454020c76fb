"""Run a subprocess safely: own process group, a timeout that kills the whole group,
an environment scrubbed of secrets, and output capped to its head and tail in bounded
memory (a command printing 200 MB costs the engine no more than the cap).
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# Environment variable names that look like credentials are never passed to children.
_SECRET_NAME = re.compile(
    r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE)", re.IGNORECASE
)
_POLL_S = 0.1
_DRAIN_AFTER_EXIT_S = 0.5
_SAFE_NAMES = frozenset({"SSH_AUTH_SOCK_DISABLED"})


def scrubbed_env(
    base: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """A copy of the environment without anything that looks like a secret."""
    env = dict(os.environ if base is None else base)
    for name in list(env):
        if _SECRET_NAME.search(name) and name not in _SAFE_NAMES:
            del env[name]
    if extra:
        env.update(extra)
    return env


def secret_values(base: Mapping[str, str] | None = None, min_len: int = 8) -> list[str]:
    """Values of secret-looking variables, longest first, for redaction of artifacts."""
    env = os.environ if base is None else base
    values = {v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= min_len}
    return sorted(values, key=len, reverse=True)


@dataclass(frozen=True)
class ProcResult:
    """A finished (or timed-out) process: exit code and capped output."""

    exit_code: int | None  # None when killed by the timeout
    output: str  # stdout and stderr interleaved, capped: head + marker + tail
    total_bytes: int  # how much the process printed in all
    truncated_bytes: int  # how much was cut from the middle
    timed_out: bool
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class _CappedBuffer:
    """Keeps the first ``head`` and last ``tail`` bytes of a stream, whatever its size."""

    def __init__(self, cap: int):
        self.head_cap = cap // 2
        self.tail_cap = cap - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.tail_cap:
                del self.tail[: len(self.tail) - self.tail_cap]

    def text(self) -> tuple[str, int]:
        cut = self.total - len(self.head) - len(self.tail)
        head = self.head.decode("utf-8", "replace")
        tail = self.tail.decode("utf-8", "replace")
        if cut > 0:
            return f"{head}\n[... {cut} bytes of output cut ...]\n{tail}", cut
        return head + tail, 0


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the process and everything it started (its whole process group)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


# Live process groups by the thread that started them, so an interrupted sub-loop's
# checks and commands (each in its own session, out of reach of Ctrl-C) die with it.
_live: dict[int, int] = {}
_live_lock = threading.Lock()


def kill_groups(threads: Iterable[int]) -> int:
    """Kill the process groups that ``run_process`` calls on these threads are running."""
    wanted = set(threads)
    with _live_lock:
        pgids = [pg for pg, thread in _live.items() if thread in wanted]
    for pg in pgids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pg, signal.SIGKILL)
    return len(pgids)


def run_process(
    command: str | Sequence[str],
    *,
    cwd: str | Path,
    timeout_s: float | None,
    shell: bool = False,
    env: Mapping[str, str] | None = None,
    max_output_bytes: int = 64_000,
    on_output: Callable[[bytes], None] | None = None,
    deadline: float | None = None,
) -> ProcResult:
    """Run ``command`` to completion or timeout. ``shell=True`` only for trusted commands.

    ``deadline`` (a ``time.monotonic()`` value) bounds the run too, so a run-wide wall
    clock limit also stops a hung child.
    """
    start = time.monotonic()
    limit = start + timeout_s if timeout_s is not None else None
    if deadline is not None:
        limit = deadline if limit is None else min(limit, deadline)
    args: str | list[str] = command if isinstance(command, str) else list(command)
    if shell and not isinstance(args, str):
        raise ValueError("shell commands are strings")
    proc = subprocess.Popen(
        args if not shell else ["/bin/sh", "-c", args],  # type: ignore[list-item]
        cwd=str(cwd),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=dict(scrubbed_env() if env is None else env),
        start_new_session=True,
    )
    with _live_lock:
        _live[proc.pid] = threading.get_ident()
    buf = _CappedBuffer(max_output_bytes)
    timed_out = False
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    fd = proc.stdout.fileno()
    exited_at: float | None = None
    try:
        while True:
            now = time.monotonic()
            wait = None if limit is None else limit - now
            if wait is not None and wait <= 0:
                timed_out = True
                break
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > _DRAIN_AFTER_EXIT_S:
                break  # the main process is gone; a leftover child holds the pipe open
            step = _POLL_S if wait is None else min(_POLL_S, wait)
            events = sel.select(timeout=step)
            if not events:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            buf.feed(chunk)
            if on_output is not None:
                on_output(chunk)
        if timed_out:
            kill_group(proc)
            proc.wait()
        else:
            remaining = None if limit is None else max(0.0, limit - time.monotonic())
            try:
                proc.wait(timeout=remaining)
            except subprocess.TimeoutExpired:
                timed_out = True
                kill_group(proc)
                proc.wait()
    finally:
        sel.close()
        proc.stdout.close()
        if proc.poll() is None:
            kill_group(proc)
            proc.wait()
        with _live_lock:
            _live.pop(proc.pid, None)
    # Children that outlived the main process (daemons, `sleep &`) die with the group.
    kill_group(proc)
    text, cut = buf.text()
    return ProcResult(
        exit_code=None if timed_out else proc.returncode,
        output=text,
        total_bytes=buf.total,
        truncated_bytes=cut,
        timed_out=timed_out,
        duration_s=time.monotonic() - start,
    )
