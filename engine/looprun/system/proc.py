"""Run a subprocess safely: own process group, whatever it leaves running ended before the
caller reads anything it wrote (by its sandbox's PID namespace, followed through the
namespace's init, see ``pidns.py``; else by a subreaper, see ``reaper_exec.py``), a
timeout that stops it all, an environment scrubbed of secrets, and output capped to its
head and tail in bounded memory (a command printing 200 MB costs the engine no more than
the cap).
"""

from __future__ import annotations

# the verdict socket comes from the C module: `socket`'s enums would cost every run's
# start about as much as the rest of its imports
import _socket
import contextlib
import dataclasses
import os
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

# credentials (by name or value): never passed to children, their values redacted everywhere
from looprun.data.value import valueclass
from looprun.system import pidns
from looprun.system.redact import (
    is_secret,
    secret_values,  # noqa: F401 - re-exported for the callers here
)

_POLL_S = 0.1
_DRAIN_AFTER_EXIT_S = 0.5
_SAFE_NAMES = frozenset({"SSH_AUTH_SOCK_DISABLED"})
_REAPER = Path(__file__).with_name("reaper_exec.py")
_REAP_GRACE_S = 2.0  # how long a stopped command's reaper has to kill its tree


# Set for every command a run starts (observers, the model's commands, agent CLIs).
# Python trusts a cached .pyc while its source has the same size and the same mtime
# second; an edit the same second that keeps the size (``a - b`` -> ``a + b``) would run
# the old bytecode, and the checks would judge code that is no longer there. Without
# writes during the run, no such .pyc can appear; pytest's rewritten tests obey it too.
NO_BYTECODE: Mapping[str, str] = {"PYTHONDONTWRITEBYTECODE": "1"}


def scrubbed_env(
    base: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """A copy of the environment without any variable that carries a credential (by its
    name or its value, see ``is_secret``); ``extra`` is what the caller passes on purpose."""
    env = dict(os.environ if base is None else base)
    for name in list(env):
        if is_secret(name, env[name]) and name not in _SAFE_NAMES:
            del env[name]
    if extra:
        env.update(extra)
    return env


class WrappedCommand(Protocol):
    """A command made ready to start confined: what to run, with what environment, and
    what to undo once it has exited."""

    @property
    def argv(self) -> list[str]: ...
    @property
    def env(self) -> dict[str, str]: ...
    @property
    def cleanup(self) -> Callable[[], None]: ...
    @property
    def contains_tree(self) -> bool: ...
    @property
    def init_flag(self) -> str | None: ...


class Confiner(Protocol):
    """What running a command needs of a sandbox (``looprun.sandbox.Sandbox`` is one);
    declared here because processes sit below the sandboxes that confine them."""

    def wrap(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> WrappedCommand: ...


@valueclass
class ProcResult:
    """A finished (or timed-out) process: exit code and capped output."""

    exit_code: int | None  # None when killed by the timeout
    output: str  # stdout and stderr interleaved, capped: head + marker + tail
    total_bytes: int  # how much the process printed in all
    truncated_bytes: int  # how much was cut from the middle
    timed_out: bool
    duration_s: float
    # processes the command left running, killed by its reaper once it exited
    leftovers: int = 0
    # False when the reaper did not see the command to its end (something killed it
    # first): what the command left may still be running, so nothing it wrote is trusted
    supervised: bool = True

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


def _ask_stop(pid: int) -> None:
    """Ask a command's reaper to kill the command and all it started (even in sessions
    of their own), resuming it first in case the command stopped it."""
    for sig in (signal.SIGCONT, signal.SIGTERM):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop the command through its reaper; kill the group if the reaper does not end."""
    _ask_stop(proc.pid)
    try:
        proc.wait(timeout=_REAP_GRACE_S)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        proc.wait()


# Live process groups by the thread that started them, so an interrupted sub-loop's
# checks and commands (each in its own session, out of reach of Ctrl-C) die with it.
_live: dict[int, int] = {}
_live_lock = threading.Lock()
_stopping: set[int] = set()  # of those, the ones asked to stop (their calls end them)


def kill_groups(threads: Iterable[int]) -> int:
    """Stop the commands that ``run_process`` calls on these threads are running: each
    reaper kills its command's whole tree, and the calls return."""
    wanted = set(threads)
    with _live_lock:
        pgids = [pg for pg, thread in _live.items() if thread in wanted]
        _stopping.update(pgids)
    for pg in pgids:
        _ask_stop(pg)
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
    sandbox: Confiner | None = None,
    pass_fds: Sequence[int] = (),
) -> ProcResult:
    """Run ``command`` to completion or timeout. ``shell=True`` only for trusted commands.

    ``deadline`` (a ``time.monotonic()`` value) bounds the run too, so a run-wide wall
    clock limit also stops a hung child. ``pass_fds`` stay open in the child (a pipe it
    reports on). With a ``sandbox`` the command runs confined;
    a missing or non-executable program raises as it would without one.
    """
    start = time.monotonic()
    limit = start + timeout_s if timeout_s is not None else None
    if deadline is not None:
        limit = deadline if limit is None else min(limit, deadline)
    args: str | list[str] = command if isinstance(command, str) else list(command)
    if shell and not isinstance(args, str):
        raise ValueError("shell commands are strings")
    argv: list[str] = (
        ["/bin/sh", "-c", args] if shell else [args] if isinstance(args, str) else args
    )
    child_env = dict(scrubbed_env() if env is None else env)
    _check_program(argv[0], Path(cwd), child_env)
    out = _Output(start, limit, max_output_bytes, on_output)
    if sandbox is not None:
        wrapped = sandbox.wrap(argv, cwd=Path(cwd), env=child_env)
        flag = wrapped.init_flag if pidns.USABLE else None
        try:
            if flag is not None:
                return _in_namespace(flag, wrapped.argv, cwd, wrapped.env, pass_fds, out)
            # the backend's own processes may still be ending as the command exits: not
            # leftovers of the command, which the backend has already ended
            settle = ["--settle"] if wrapped.contains_tree else []
            return _under_reaper(settle, wrapped.argv, cwd, wrapped.env, pass_fds, out)
        finally:
            wrapped.cleanup()
    return _under_reaper([], argv, cwd, child_env, pass_fds, out)


@valueclass
class _Output:
    """When a command started and must end, and where its output goes."""

    start: float
    limit: float | None
    max_bytes: int
    on_output: Callable[[bytes], None] | None


def _popen(
    argv: list[str], cwd: str | Path, env: Mapping[str, str], pass_fds: Sequence[int]
) -> subprocess.Popen[bytes]:
    global _SPAWNED
    _SPAWNED += 1  # counted before the start: a failed start may still have run something
    return subprocess.Popen(
        argv,
        cwd=str(cwd),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
        pass_fds=tuple(pass_fds),
    )


def _under_reaper(
    settle: list[str],
    argv: list[str],
    cwd: str | Path,
    env: Mapping[str, str],
    pass_fds: Sequence[int],
    out: _Output,
) -> ProcResult:
    """The command as the only child of a subreaper (``reaper_exec.py``) that kills what
    it leaves running and says, on a socket only it holds, how many it killed."""
    verdict, reaper_end = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
    fd = str(reaper_end.fileno())
    argv = [sys.executable, "-I", "-S", str(_REAPER), fd, *settle, "--", *argv]
    try:
        proc = _popen(argv, cwd, env, (*pass_fds, reaper_end.fileno()))
    except BaseException:
        verdict.close()
        raise
    finally:
        reaper_end.close()
    try:
        return _with_verdict(_supervise(proc, out, _stop), verdict)
    finally:
        verdict.close()


def _in_namespace(
    flag: str,
    argv: list[str],
    cwd: str | Path,
    env: Mapping[str, str],
    pass_fds: Sequence[int],
    out: _Output,
) -> ProcResult:
    """The command in a PID namespace of its own that the backend names the init of
    (``flag``: an option of its program that writes it to a descriptor). The namespace
    is the reaper: everything the command started ends with it, and the command is over
    once its init has ended (``pidns``); a stop kills that init, and so the namespace."""
    said, told = os.pipe()
    try:
        proc = _popen([argv[0], flag, str(told), *argv[1:]], cwd, env, (*pass_fds, told))
    except BaseException:
        os.close(said)
        raise
    finally:
        os.close(told)
    init: int | None = None
    try:
        try:
            init = pidns.announced(said, out.limit)
        except BaseException:  # an interrupt: the namespace dies with the killed backend
            kill_group(proc)
            proc.wait()
            raise

        def stop(proc: subprocess.Popen[bytes]) -> None:
            if init is not None:
                pidns.kill(init)
            kill_group(proc)
            proc.wait()

        result = _supervise(proc, out, stop)
        if init is None:  # none named in time (a stop during the start), or no namespace
            init = pidns.announced(said, time.monotonic() + _REAP_GRACE_S)
            if init is None:
                return result
        if not pidns.ended(init, _REAP_GRACE_S):
            pidns.kill(init)
            if not pidns.ended(init, _REAP_GRACE_S):
                return dataclasses.replace(result, supervised=False)
        return result
    finally:
        os.close(said)
        if init is not None:
            os.close(init)


def _with_verdict(result: ProcResult, verdict: _socket.socket) -> ProcResult:
    """What the reaper said once the command and all it left were gone; no word (it was
    killed first, or could not start) leaves the result unsupervised."""
    verdict.settimeout(_REAP_GRACE_S)  # its writer has exited: EOF comes at once
    said = b""
    with contextlib.suppress(OSError):
        while chunk := verdict.recv(256):
            said += chunk
            if len(said) > 256:
                break
    words = said.decode("ascii", "replace").split()
    if len(words) != 2 or words[0] != "done" or not words[1].isdigit():
        return dataclasses.replace(result, supervised=False)
    return dataclasses.replace(result, leftovers=int(words[1]))


_SPAWNED = 0


def spawned() -> int:
    """How many commands this process has started or asked to act (the engine's own git
    excluded): a directory no command could have reached since it was made needs no
    renewal, an object stored before none started needs no second check."""
    return _SPAWNED


def note_command() -> None:
    """Count a command started elsewhere, or asked again to act (an MCP server, which
    lives across iterations and may write wherever its tools reach)."""
    global _SPAWNED
    _SPAWNED += 1


def _check_program(program: str, cwd: Path, env: Mapping[str, str]) -> None:
    """Raise as ``Popen`` would for a program that is missing or not executable, so a
    sandboxed command fails the same way as an unconfined one."""
    search = env.get("PATH", os.defpath)
    if os.sep in program:
        path = cwd / program
        exists, runnable = path.exists(), path.is_file() and os.access(path, os.X_OK)
    else:
        runnable = shutil.which(program, path=search) is not None
        exists = runnable or shutil.which(program, mode=os.F_OK, path=search) is not None
    if not exists:
        raise FileNotFoundError(2, "No such file or directory", program)
    if not runnable:
        raise PermissionError(13, "Permission denied", program)


def _supervise(
    proc: subprocess.Popen[bytes],
    out: _Output,
    stop: Callable[[subprocess.Popen[bytes]], None],
) -> ProcResult:
    """Read the capped output until exit, the limit or a stop (``kill_groups``); then
    ``stop`` the command and all it started."""
    start, limit, on_output = out.start, out.limit, out.on_output
    with _live_lock:
        _live[proc.pid] = threading.get_ident()
    buf = _CappedBuffer(out.max_bytes)
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
            if proc.pid in _stopping:
                break  # stopped from another thread: ended below, as at a timeout
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
        if timed_out or proc.pid in _stopping:
            stop(proc)
        else:
            remaining = None if limit is None else max(0.0, limit - time.monotonic())
            try:
                proc.wait(timeout=remaining)
            except subprocess.TimeoutExpired:
                timed_out = True
                stop(proc)
    finally:
        sel.close()
        proc.stdout.close()
        if proc.poll() is None:
            stop(proc)
        with _live_lock:
            _live.pop(proc.pid, None)
            _stopping.discard(proc.pid)
    # the reaper killed what outlived the command; what is left in its group (a reaper
    # that was killed first) dies with the group
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
