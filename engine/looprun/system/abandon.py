"""Ending a process whose foreign runtime cannot end cleanly.

A Ray driver whose cluster head is frozen hangs in Ray's own exit handler (it waits on
the head for minutes). Once the run is recorded and its summary written, such a process
ends at once with the exit code it was leaving with, its output flushed, skipping the
exit handlers that would wait. A head that froze after the last call is found by the
probes asked as the process ends.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from collections.abc import Callable

_reasons: list[str] = []
_probes: list[Callable[[], str]] = []
_skipped: list[Callable[..., object]] = []


def skip_exit_handler(handler: Callable[..., object]) -> None:
    """Ask that ``handler``, a foreign runtime's exit handler that only disconnects
    (Ray's takes about a second), not run once the run is recorded: the process then
    ends after the other exit handlers, without the interpreter's teardown, which would
    run into that runtime's live threads."""
    _skipped.append(handler)


def abandon_at_exit(reason: str) -> None:
    """Ask that this process skip its exit handlers when it ends (``reason`` says why)."""
    _reasons.append(reason)


def probe_at_exit(probe: Callable[[], str]) -> None:
    """Ask ``probe`` as the process ends why its exit handlers would wait ("": they
    would not); an answer abandons the process as :func:`abandon_at_exit` does."""
    _probes.append(probe)


def exit_now_if_abandoned(code: object) -> None:
    """With an abandon asked for, or a probe answering why, flush stdout and stderr and
    end the process with ``code`` (a ``SystemExit`` code) without running exit handlers;
    else return."""
    for probe in () if _reasons else _probes:
        try:
            reason = probe()
        except Exception:  # a probe that fails says nothing: the usual exit
            continue
        if reason:
            with contextlib.suppress(Exception):
                print(f"looprun: {reason}: ending without waiting for it", file=sys.stderr)
            abandon_at_exit(reason)
            break
    if not _reasons:
        if _skipped:
            _exit_skipping(code)
        return
    if code is not None and not isinstance(code, int):  # what sys.exit would print
        with contextlib.suppress(Exception):
            print(code, file=sys.stderr)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(exit_status(code))


def _exit_skipping(code: object) -> None:
    """End with ``code``: every exit handler but the skipped ones, output flushed."""
    for handler in _skipped:
        atexit.unregister(handler)
    _exit_after_handlers(code)


def _exit_after_handlers(code: object) -> None:
    """Print what ``sys.exit(code)`` would, run the exit handlers, flush the output and
    end the process with ``code``'s status. Returns, the handlers run, only when the
    output cannot be flushed (a closed pipe): the usual exit then reports it."""
    if code is not None and not isinstance(code, int):  # what sys.exit would print
        with contextlib.suppress(Exception):
            print(code, file=sys.stderr)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            return
    os._exit(exit_status(code))


def exit_status(code: object) -> int:
    """The status ``sys.exit(code)`` would end the process with."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    return 1


def exit_without_teardown(code: object) -> None:
    """End the process with ``code`` (a ``SystemExit`` code) as ``sys.exit`` would, less
    the interpreter's teardown: freeing every object and module of a run costs a
    noticeable share of a short run's wall time and does nothing the system does not.
    The exit handlers still run (temporary directories removed, finalizers called) and
    the output is flushed; with another thread still running, the usual exit waits for
    it instead."""
    if threading.active_count() > 1:
        sys.exit(code)
    _exit_after_handlers(code)
    sys.exit(code)  # the output could not be flushed: the usual exit reports it
