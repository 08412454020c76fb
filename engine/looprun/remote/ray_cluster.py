"""Ray itself: joining a cluster (or starting a local one) and the board actor workers
poll (the workers themselves are in ``warm``).

This is the one module that imports Ray, and only when ``connect`` is called: Ray is an
optional dependency, and everything else (``ray_executor`` included) imports without it.
The rest of looprun holds the module ``connect`` returns, never its own import of it.
It imports nothing of the engine either: the board's Ray process loads this module, and
a board that starts fast is a run that starts fast.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from typing import Any

from looprun.errors import UsageError
from looprun.system.abandon import probe_at_exit, skip_exit_handler

NEEDS_RAY = "--executor ray needs Ray: pip install 'looprun[ray]' (on every node)"
PROBE_S = 2.0  # how long one probe of the head waits for its answer
JOIN_S = 60.0  # how long joining an existing cluster may take


class SilentHead(Exception):
    """The head accepted the connection and never answered: it is frozen or cut off."""


def connect(
    address: str | None, num_cpus: int | None = None, join_timeout_s: float = JOIN_S
) -> Any:
    """Import Ray and join the cluster at ``address`` (None: start a local one bound to
    127.0.0.1 with ``num_cpus``); returns the ``ray`` module. Joining gives up after
    ``join_timeout_s`` with ``SilentHead``: Ray itself would wait on a frozen head for
    many minutes."""
    if address is None or _is_loopback(address):
        # A local cluster stays on the loopback interface (Ray's own switch for it).
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    if address is not None:
        _reachable(address)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        import ray
    except ImportError as exc:
        raise UsageError(NEEDS_RAY) from exc
    if not ray.is_initialized():
        options: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,
            "configure_logging": False,
        }
        if address is not None:
            options["address"] = address
        elif num_cpus is not None:
            options["num_cpus"] = num_cpus
        try:
            if address is None:
                ray.init(**options)
            else:
                _join_within(ray, options, join_timeout_s)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise UsageError(f"--executor ray: cannot reach the cluster: {exc}") from exc
        head = head_address(ray)
        probe_at_exit(lambda: _lost_head(ray, head))
        if address is not None:
            # joined, not started here: Ray's exit handler only disconnects, for about a
            # second per run (the cluster ends the job when this process goes)
            skip_exit_handler(ray._private.worker.shutdown)
    _messages_to_stderr(ray)
    return ray


def _keeps_sigterm_quietly(record: logging.LogRecord) -> bool:
    """Drop Ray's warning that off the main thread it sets no SIGTERM handler: the run
    has its own, which is the point."""
    return "SIGTERM handler is not set" not in record.getMessage()


def _join_within(ray: Any, options: dict[str, Any], timeout_s: float) -> None:
    """``ray.init`` in a thread of its own, waited on for ``timeout_s`` at most. (Off the
    main thread Ray also leaves the run's own SIGTERM handler in place.)"""
    outcome: list[BaseException | None] = []

    def join() -> None:
        try:
            ray.init(**options)
            outcome.append(None)
        except BaseException as exc:  # handed to the caller's thread below
            outcome.append(exc)

    worker_log = logging.getLogger("ray._private.worker")
    worker_log.addFilter(_keeps_sigterm_quietly)
    try:
        thread = threading.Thread(target=join, name="looprun-ray-join", daemon=True)
        thread.start()
        thread.join(timeout_s)
    finally:
        worker_log.removeFilter(_keeps_sigterm_quietly)
    if not outcome:
        raise SilentHead(f"it did not let this run join within {timeout_s:g} s")
    if outcome[0] is not None:
        raise outcome[0]


def _messages_to_stderr(ray: Any) -> None:
    """Ray prints the cluster's error messages (``(raylet) A worker died ...``) to the
    driver's stdout whatever ``log_to_driver`` says; stdout is the run's (``--json``
    holds the summary alone), so they go to stderr with the progress lines."""
    module = getattr(getattr(ray, "_private", None), "worker", None)
    original = getattr(module, "print_to_stdstream", None)
    if original is None or getattr(original, "looprun_stderr", False):
        return

    def to_stderr(data: dict[str, Any], ignore_prefix: bool) -> None:
        original(dict(data, is_err=True), ignore_prefix)

    to_stderr.looprun_stderr = True  # type: ignore[attr-defined]
    module.print_to_stdstream = to_stderr  # type: ignore[union-attr]


def _is_loopback(address: str) -> bool:
    host = address.rsplit(":", 1)[0].strip("[]")
    return host in ("localhost", "::1") or host.startswith("127.")


def _reachable(address: str, timeout_s: float = 5.0) -> None:
    """Ray retries an unreachable cluster for minutes; say so at once instead."""
    problem = unreachable(address, timeout_s)
    if problem:
        raise UsageError(f"--executor ray:{address}: cannot reach the cluster: {problem}")


def unreachable(address: str, timeout_s: float = PROBE_S) -> str:
    """Why the cluster's head (its GCS at ``address``) does not answer a TCP connection,
    or "" when it does. A head that died refuses at once; Ray itself would only notice
    after its reconnect timeout, and then end the process."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return ""
    except (OSError, ValueError) as exc:
        return str(exc) or type(exc).__name__


def silent_head(ray: Any, address: str, timeout_s: float = PROBE_S) -> str:
    """Why the cluster's head (its GCS at ``address``) does not answer, or "" when it
    does, within about ``timeout_s``. A dead head refuses the TCP connection at once; a
    stopped or cut-off one still has its listening socket, so the kernel completes the
    handshake for it: only a call the GCS itself must answer (Ray's ``check_alive``,
    bounded by its own deadline) tells. Never waits longer than the deadlines given."""
    problem = unreachable(address, timeout_s)
    if problem:
        return problem
    client = getattr(getattr(ray._private.worker, "global_worker", None), "gcs_client", None)
    if client is None:  # not connected, or a Ray without it: the TCP answer is all there is
        return ""
    try:
        client.check_alive([], timeout=timeout_s)
    except Exception as exc:  # RpcError (deadline exceeded, unavailable), or shut down
        return f"no answer within {timeout_s:g} s ({_first_line(exc)})"
    return ""


def _lost_head(ray: Any, head: str) -> str:
    """Why Ray's exit handler would wait on the head (it froze or went after the last
    call), or "" when it answers."""
    problem = silent_head(ray, head)
    return f"the Ray cluster's head {head} does not answer ({problem})" if problem else ""


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def head_address(ray: Any) -> str:
    """The address of the cluster's head (its GCS) this driver is connected to."""
    return str(ray.get_runtime_context().gcs_address)


_BOARDS: dict[int, Any] = {}


class Board:
    """What the outer loop and its workers share while jobs run: the stop flag workers
    poll. It lives with the driver, so a worker that finds it gone knows its run died
    (progress lines are kept by each warm worker, see ``warm``)."""

    def __init__(self) -> None:
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True

    def is_stopped(self) -> bool:
        return self.stopped


def board_class(ray: Any) -> Any:
    """``Board`` as a Ray actor class (made once per ``ray`` module)."""
    if id(ray) not in _BOARDS:
        _BOARDS[id(ray)] = ray.remote(num_cpus=0, max_restarts=0)(Board)
    return _BOARDS[id(ray)]


def new_board(ray: Any) -> Any:
    """A ``Board`` on the driver's own node: it shares the driver's fate, so losing a
    worker node never takes the progress lines or the stop flag with it."""
    here = ray.get_runtime_context().get_node_id()
    strategies = ray.util.scheduling_strategies
    strategy = strategies.NodeAffinitySchedulingStrategy(node_id=here, soft=False)
    return board_class(ray).options(scheduling_strategy=strategy).remote()
