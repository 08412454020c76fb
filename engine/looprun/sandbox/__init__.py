"""OS sandboxes for the commands a run starts (observers and the model's ``run`` tool).

``sandbox_for`` turns the chosen mode into a ``Sandbox`` (or None when commands run
unconfined): ``off`` never confines, ``auto`` uses the first backend that works here and
says once on stderr when none does, ``required`` raises ``SandboxUnavailable`` instead.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence

from looprun.sandbox.base import (
    MODES,
    Backend,
    Confinement,
    Mode,
    Sandbox,
    SandboxUnavailable,
    Wrapped,
)
from looprun.sandbox.bwrap import Bubblewrap
from looprun.sandbox.landlock import Landlock

__all__ = [
    "MODES",
    "Backend",
    "Confinement",
    "Mode",
    "Sandbox",
    "SandboxUnavailable",
    "Wrapped",
    "backends",
    "pick",
    "probe_ahead",
    "sandbox_for",
]

_said: set[str] = set()
_said_lock = threading.Lock()


def backends(names: str | None = None) -> list[Backend]:
    """The backends to try, in order: bubblewrap, then Landlock; ``names`` (from
    ``LOOPRUN_SANDBOX_BACKENDS``, comma-separated) narrows or reorders them."""
    known: dict[str, Backend] = {"bwrap": Bubblewrap(), "landlock": Landlock()}
    if names is None:
        names = os.environ.get("LOOPRUN_SANDBOX_BACKENDS", "bwrap,landlock")
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    return [known[n] for n in wanted if n in known]


def probe_ahead(mode: str | None) -> None:
    """Start finding out, on a thread of its own, whether the first backend works here
    (a probe run inside it), so the run's setup does not wait for that when it picks one
    (``pick`` waits for the probe under way). Nothing is started for ``off``."""
    if mode == "off":
        return
    first = backends()[:1]
    if first:
        threading.Thread(target=first[0].problem, name="sandbox-probe", daemon=True).start()


def _say_once(message: str, warn: Callable[[str], None]) -> None:
    with _said_lock:
        first = message not in _said
        _said.add(message)
    if first:
        warn(message)


def pick(
    mode: str, warn: Callable[[str], None], candidates: Sequence[Backend] | None = None
) -> Backend | None:
    """The backend ``mode`` asks for on this host; see the module docstring."""
    if mode == "off":
        return None
    problems = []
    for backend in backends() if candidates is None else candidates:
        problem = backend.problem()
        if problem is None:
            if problems:  # a fallback covers less than the first choice: say which
                _say_once(
                    f"note: commands run in the {backend.name} sandbox ({'; '.join(problems)})",
                    warn,
                )
            return backend
        problems.append(problem)
    why = "; ".join(problems) or "no sandbox backend enabled"
    if mode == "required":
        raise SandboxUnavailable(f"sandbox: required, but no OS sandbox works here: {why}")
    _say_once(f"note: commands run without an OS sandbox ({why})", warn)
    return None


def sandbox_for(
    mode: str,
    confinement: Confinement,
    warn: Callable[[str], None],
    candidates: Sequence[Backend] | None = None,
) -> Sandbox | None:
    """A sandbox for one run's commands, or None when they run unconfined."""
    backend = pick(mode, warn, candidates)
    return None if backend is None else backend.confine(confinement)
