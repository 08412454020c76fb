"""A command's PID namespace, followed from outside through its init's pidfd.

A sandbox that runs each command in a PID namespace of its own (bubblewrap) ends the
command's whole tree with it: when the namespace's init exits, the kernel kills every
process left in the namespace, ``setsid`` or double fork or not, and the init's exit
completes only once they are all gone. The sandbox's own outer process, the one the
engine starts and waits for, may exit a moment *before* that init (bubblewrap's does: its
init tells it the command's status and then exits), so a command is over when its
namespace's init has ended. Waiting on the init's pidfd is that wait, and killing the
init ends the whole namespace at once (a timeout, a stop). Such a command needs no
reaper process of its own (``reaper_exec.py``): the namespace is one that the command
cannot leave and whose init it cannot take down first.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import time


def _usable() -> bool:
    """Whether this Python and kernel have pidfds (Linux 5.3 or later)."""
    if not hasattr(os, "pidfd_open") or not hasattr(signal, "pidfd_send_signal"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:
        return False
    return True


USABLE = _usable()


def announced(fd: int, until: float | None) -> int | None:
    """A pidfd for the init the sandbox names on ``fd`` (JSON with ``child-pid``, written
    once the namespace exists, and the descriptor closed before the command starts), or
    None: it closed the descriptor without naming one (it failed before making the
    namespace), or named none by ``until`` (a ``time.monotonic()`` value)."""
    said = b""
    while True:
        wait = None if until is None else until - time.monotonic()
        if wait is not None and wait <= 0:
            return None
        if not select.select([fd], [], [], wait)[0]:
            return None
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        said += chunk
    try:
        pid = json.loads(said.decode("utf-8", "replace"))["child-pid"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(pid, int) or pid <= 1:
        return None
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:  # it has already ended, and all of its namespace with it
        return None


def kill(pidfd: int) -> None:
    """End the namespace: ``SIGKILL`` to its init (honoured from the parent namespace)."""
    with contextlib.suppress(ProcessLookupError):
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)


def ended(pidfd: int, within: float) -> bool:
    """Whether the init has exited (and so everything in its namespace), waiting up to
    ``within`` seconds for it."""
    return bool(select.select([pidfd], [], [], within)[0])
