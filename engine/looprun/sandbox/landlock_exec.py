"""Apply a Landlock ruleset to this process, then run the command under it.

Started as a script (``python -I -S landlock_exec.py CONFIG -- ARGV...``), standard
library only, so it costs one bare interpreter start. CONFIG is JSON: ``writable``
directories, ``files`` writable one by one (``/dev/null``), ``network`` (false: every TCP
connect and bind is refused), ``connect`` (TCP ports that may still be connected to: an
agent CLI's way to the engine's bridge). Reads and execution stay allowed everywhere; Landlock also
keeps the command from reading other processes' ``/proc/<pid>/environ`` (no ptrace
access outside its domain) and, from ABI 6, from signalling them or connecting to their
abstract Unix sockets.

This process is a child subreaper and stays *outside* the domain: it forks, and only
the child applies the ruleset (``no_new_privs``, then ``landlock_restrict_self``) and
execs the command. So the command cannot kill its reaper (from ABI 6, a signal out of
the domain is refused), and when the command exits, whatever it left behind (a daemon
that called ``setsid``) has been re-parented here and is killed before this process
exits with the command's status, saying how many it killed on stderr.

``--probe`` applies the ruleset to itself and prints the ABI version, for the backend's
check that Landlock works on this host.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import sys

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same on every architecture
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2
_PR_SET_NO_NEW_PRIVS, _PR_SET_CHILD_SUBREAPER = 38, 36

_WRITE_FILE = 1 << 1
_REMOVE_DIR, _REMOVE_FILE = 1 << 4, 1 << 5
_MAKE = sum(1 << bit for bit in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_REFER, _TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3
_BIND_TCP, _CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _call(number: int, *args: object) -> int:
    result = _libc.syscall(ctypes.c_long(number), *args)
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"landlock syscall {number}: {os.strerror(err)}")
    return int(result)


def abi() -> int:
    """The Landlock ABI version of the running kernel (OSError when it has none)."""
    return _call(
        _CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)
    )


class _NetPort(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


def restrict(
    writable: list[str], files: list[str], network: bool, connect: tuple[int, ...] = ()
) -> int:
    """Confine this process (and what it starts) to the rules; returns the ABI used."""
    version = abi()
    dir_rights = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE
    if version >= 2:
        dir_rights |= _REFER
    if version >= 3:
        dir_rights |= _TRUNCATE
    attr = _RulesetAttr(dir_rights, 0, 0)
    size = 8  # ABI 1-3 know only the file system field
    if version >= 4 and not network:
        attr.handled_access_net = _BIND_TCP | _CONNECT_TCP
        size = 16
    if version >= 6:
        attr.scoped = _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL
        size = 24
    ruleset = _call(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    try:
        file_rights = _WRITE_FILE | (_TRUNCATE if version >= 3 else 0)
        for paths, rights in ((writable, dir_rights), (files, file_rights)):
            for path in paths:
                try:
                    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                except OSError:
                    continue  # a path that does not exist needs no rule
                try:
                    rule = _PathBeneath(rights, fd)
                    if not os.path.isdir(path):
                        rule.allowed_access = rights & file_rights
                    _call(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0)
                finally:
                    os.close(fd)
        if version >= 4 and not network:
            for port in connect:
                net = _NetPort(_CONNECT_TCP, port)
                _call(_ADD_RULE, ruleset, _RULE_NET_PORT, ctypes.byref(net), 0)
        if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        _call(_RESTRICT_SELF, ruleset, ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
    return version


def _reap_all() -> int:
    """Kill and reap every process left re-parented to this subreaper; how many."""
    me = str(os.getpid())
    killed = 0
    while True:
        children = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read().decode("ascii", "replace")
            except OSError:
                continue
            state, ppid = stat.rpartition(")")[2].split()[:2]
            if ppid == me:
                children.append(int(entry))
                killed += state != "Z"  # a zombie is only reaped
        if not children:
            return killed
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for _ in children:
            try:
                os.wait()
            except ChildProcessError:
                break


def _start(command: list[str], rules: dict[str, object]) -> int:
    """Fork the command: only the child is confined (then execs), so this process stays
    outside the Landlock domain, where (from ABI 6) the command cannot signal it."""
    pid = os.fork()
    if pid != 0:
        return pid
    try:
        connect = tuple(int(p) for p in rules.get("connect", ()))
        restrict(list(rules["writable"]), list(rules["files"]), bool(rules["network"]), connect)
    except OSError as exc:
        print(f"landlock: cannot confine {command[0]}: {exc}", file=sys.stderr)
        os._exit(126)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"landlock: cannot run {command[0]}: {exc.strerror}", file=sys.stderr)
    os._exit(127)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--probe"]:
        print(restrict([], [], network=False))
        return 0
    config, sep, command = argv[0], argv[1:2], argv[2:]
    if sep != ["--"] or not command:
        print("usage: landlock_exec.py CONFIG -- ARGV...", file=sys.stderr)
        return 2
    rules = json.loads(config)
    if _libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
    try:
        pid = _start(command, rules)
    except OSError as exc:
        print(f"landlock: cannot start {command[0]}: {exc}", file=sys.stderr)
        return 126
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda number, frame: os.kill(pid, number))
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except ChildProcessError:
            status = 0
            break
        except InterruptedError:
            continue
    left = _reap_all()
    if left:
        print(f"landlock: killed {left} process(es) the command left running", file=sys.stderr)
    return os.waitstatus_to_exitcode(status) if status >= 0 else 1


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.exit(128 - code if code < 0 else code)
