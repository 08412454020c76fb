"""The sandbox protocol: what a run's commands may touch, and how one command is wrapped.

Backends (bubblewrap, Landlock) implement ``Backend``; the rest of the engine sees only
``Sandbox.wrap``, which turns an argv into the argv that runs it confined. Nothing
outside this package knows how a backend does it.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from looprun.data.value import valueclass
from looprun.errors import EXIT_INVALID, LooprunError

T = TypeVar("T")

Mode = Literal["auto", "required", "off"]
MODES: tuple[str, ...] = ("auto", "required", "off")


class SandboxUnavailable(LooprunError):
    """``sandbox: required`` on a host where no backend works: a setup problem, so it
    stops the run before anything starts, like a usage error."""

    exit_code = EXIT_INVALID


@valueclass
class Way:
    """An agent CLI's one way out of a sandbox without network: the loopback ``port`` it
    connects to. Under bubblewrap a forwarder in the namespace listens there and relays
    to the engine's Unix ``socket``; under Landlock (no namespace) ``port`` is the engine's
    own loopback listener and TCP connect is allowed to that port alone."""

    port: int
    socket: Path | None = None


@valueclass
class Confinement:
    """What the commands of one run may touch.

    ``writable`` directories (the workdir, the run's artifacts) are writable; everything
    else is read-only. ``read_only`` directories and files inside a writable one (``.git``,
    whether a directory or a linked worktree's file, the state directory) stay read-only,
    except for writable directories nested in them.
    ``hidden`` paths (credential stores, see ``hidden.py``) cannot be read at all, except
    for the parts of them that are writable or read-only directories of the run.
    """

    writable: tuple[Path, ...]
    read_only: tuple[Path, ...] = ()
    network: bool = False
    hidden: tuple[Path, ...] = ()
    way_out: Way | None = None


def _nothing() -> None:
    return None


@valueclass
class Wrapped:
    """One command ready to start: its argv and environment, and what to undo after."""

    argv: list[str]
    env: dict[str, str]
    cleanup: Callable[[], None] = field(default=_nothing)
    # the backend ends all the command started once it exits (a PID namespace): what is
    # still there a moment after is the backend's own, ending, and not the command's
    contains_tree: bool = False
    # an option of the backend's program, given first, that makes it write the init of
    # the command's PID namespace, as JSON ``{"child-pid": N}``, to a descriptor, which
    # it closes before the command starts (bubblewrap's ``--info-fd``): the command is
    # then followed through that init (``system/pidns.py``), with no reaper of its own
    init_flag: str | None = None


class Sandbox(Protocol):
    """A backend bound to one run's confinement."""

    name: str
    confinement: Confinement
    private_network: bool  # its own network namespace: a way out needs a Unix socket

    def wrap(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> Wrapped: ...


class Backend(Protocol):
    """One way of confining commands on this host."""

    name: str

    def problem(self) -> str | None:
        """Why it cannot be used here (probed by running it), or None when it works."""
        ...

    def confine(self, confinement: Confinement) -> Sandbox: ...


def private_tmp(env: Mapping[str, str]) -> tuple[Path, dict[str, str], Callable[[], None]]:
    """A fresh temp directory for one command, the environment pointing at it, and its
    removal: a command's temp files neither outlive it nor meet another command's."""
    path = Path(tempfile.mkdtemp(prefix="looprun-tmp-")).resolve()
    new_env = dict(env)
    for name in ("TMPDIR", "TMP", "TEMP"):
        new_env[name] = str(path)
    return path, new_env, lambda: shutil.rmtree(path, ignore_errors=True)


def probe_once(probe: Callable[..., T]) -> Callable[..., T]:
    """``functools.cache`` for a backend's probe: run once per process (and argument),
    a caller that comes while it runs (``probe_ahead``'s thread started it) waiting for
    its answer instead of probing again."""
    cached = functools.cache(probe)
    lock = threading.Lock()

    @functools.wraps(probe)
    def answer(*args: Any) -> T:
        with lock:
            return cached(*args)

    return answer
