"""Run one command as the only child of a subreaper that kills what it leaves running.

Started as a script (``python -I -S reaper_exec.py STATUS_FD [--settle] -- ARGV...``),
standard library only, so it costs one bare interpreter start. A check's report is a plain file:
a process the command started in a session of its own (``setsid``, a double fork,
``nohup ... &``) escapes a process-group kill and could rewrite the report once the
check has ended, after the engine decided to read it. This process is a child
subreaper (``PR_SET_CHILD_SUBREAPER``), so everything the command leaves behind is
re-parented here whatever session it moved to, and it is all killed before this
process exits: the engine reads a report only after that.

``SIGTERM``, ``SIGINT`` or ``SIGHUP`` (the engine's timeout, an interrupted run) kill
the command and everything it started; every other signal the command could send is
ignored. The verdict goes to STATUS_FD, a socket only this process holds (not passed to
the command, and a socket cannot be reopened through ``/proc``): ``done N``, N being how
many processes it killed after the command exited. A reaper that was killed first never
writes it, so the engine knows not to trust the check. The exit status is the
command's own, a death by signal included.
"""

from __future__ import annotations

import _signal as signal  # the module without its enums: a faster start
import ctypes
import os
import resource
import sys
import time

_PR_SET_CHILD_SUBREAPER = 36
_SETTLE_S = 0.5
_STOP = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_KEEP = {signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD, signal.SIGCONT, *_STOP}
_IGNORED = [s for s in signal.valid_signals() if s not in _KEEP]


# try/except rather than contextlib.suppress: contextlib's imports cost this short-lived
# process more than its own work
def _kill(pid: int) -> None:
    try:  # noqa: SIM105
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _dispose(sig: int, action: object) -> None:
    try:  # noqa: SIM105
        signal.signal(sig, action)
    except (OSError, ValueError):
        pass


def _descendants(me: int) -> tuple[set[int], bool]:
    """The live processes under ``me`` (from ``/proc``), and whether ``me`` has any child
    at all (a zombie to reap counts)."""
    children: dict[int, list[int]] = {}
    alive: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode("ascii", "replace")
        except OSError:
            continue
        state, ppid = stat.rpartition(")")[2].split()[:2]
        pid = int(entry)
        children.setdefault(int(ppid), []).append(pid)
        if state not in ("Z", "X"):
            alive.add(pid)
    found: set[int] = set()
    todo = list(children.get(me, ()))
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, ()))
    return found & alive, bool(children.get(me))


def _reap_all(main: int, statuses: dict[int, int]) -> int:
    """Kill every process under this one and reap them all; how many were alive (the
    command itself excluded). Orphans of a killed process are re-parented here, so the
    next scan finds them."""
    me = os.getpid()
    killed: set[int] = set()
    while True:
        alive, any_child = _descendants(me)
        for pid in alive:
            _kill(pid)
        killed |= alive
        if not any_child:
            return len(killed - {main})
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return len(killed - {main})
        statuses[pid] = status
        _reap_ready(statuses)  # whatever else is ready, before scanning again


def _reap_ready(statuses: dict[int, int]) -> None:
    """Reap every child that has ended, without waiting."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        statuses[pid] = status


def _settle(statuses: dict[int, int]) -> None:
    """Give what is still under this process up to ``_SETTLE_S`` to end by itself: with
    ``--settle`` the command was a sandbox that ends its whole tree when it exits (a PID
    namespace), whose own processes may be a moment behind it. Nothing the command
    started can outlive that namespace, so waiting lets none of it act; it only keeps
    the backend's ending processes out of the leftover count."""
    me, deadline = os.getpid(), time.monotonic() + _SETTLE_S
    while time.monotonic() < deadline:
        _reap_ready(statuses)
        if not _descendants(me)[0]:
            return
        time.sleep(0.005)


def _start(command: list[str]) -> int:
    pid = os.fork()
    if pid != 0:
        return pid
    try:
        for sig in (*_IGNORED, *_STOP):  # the command starts with default dispositions
            _dispose(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP)
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"cannot run {command[0]}: {exc.strerror}", file=sys.stderr, flush=True)
        os._exit(126 if isinstance(exc, PermissionError) else 127)
    os._exit(127)


def _exit_as(status: int) -> None:
    """Leave with the command's status; a death by signal is passed on as one."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
            os.kill(os.getpid(), sig)
        except (OSError, ValueError):
            pass
        os._exit(128 + sig)
    os._exit(os.waitstatus_to_exitcode(status))


def main(argv: list[str]) -> None:
    settle = argv[1:2] == ["--settle"]
    rest = argv[2:] if settle else argv[1:]
    if not argv or not argv[0].isdigit() or rest[:1] != ["--"] or len(rest) < 2:
        print("usage: reaper_exec.py STATUS_FD [--settle] -- ARGV...", file=sys.stderr)
        os._exit(2)
    status_fd, command = int(argv[0]), rest[1:]
    os.set_inheritable(status_fd, False)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("cannot become a child subreaper", file=sys.stderr)
        os._exit(126)
    for sig in _IGNORED:
        _dispose(sig, signal.SIG_IGN)
    # a stop that arrives while the command starts waits for the handler to know its pid
    signal.pthread_sigmask(signal.SIG_BLOCK, _STOP)
    pid = _start(command)

    stopped = []

    def stop(number: int, frame: object) -> None:
        stopped.append(number)
        _kill(pid)  # what it started is killed by _reap_all

    for sig in _STOP:
        signal.signal(sig, stop)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP)
    statuses: dict[int, int] = {}
    while pid not in statuses:
        try:
            done, status = os.waitpid(pid, 0)
        except ChildProcessError:
            statuses[pid] = 0
            break
        statuses[done] = status
    if settle and not stopped:
        _settle(statuses)
    killed = _reap_all(pid, statuses)
    try:
        os.write(status_fd, f"done {killed}\n".encode())
        os.close(status_fd)
    except OSError:
        pass
    sys.stdout.flush()
    sys.stderr.flush()
    _exit_as(statuses[pid])


if __name__ == "__main__":
    main(sys.argv[1:])
