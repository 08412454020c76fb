"""The Landlock backend, for hosts where bubblewrap cannot run (no namespaces allowed)
but the kernel has Landlock: writes outside the writable directories and (from ABI 4)
every TCP connect and bind are refused, other processes' ``/proc/<pid>/environ`` is
unreadable, and what a command leaves running is killed when it exits.

It covers less than bubblewrap: no PID namespace (the command sees the host's process
list), and UDP and path-named Unix sockets stay reachable. ``landlock_exec.py`` does the
work: it forks, confines only the child that execs the command, and reaps from outside
the domain; at a timeout, the reaper every command runs under (``system/proc``), outside
the domain too, collects what this one could not.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from looprun.data.value import valueclass
from looprun.sandbox.base import Confinement, Wrapped, private_tmp, probe_once

_EXEC = Path(__file__).with_name("landlock_exec.py")
_DEV_FILES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty")
_PROBE_TIMEOUT_S = 10.0


@valueclass
class LandlockSandbox:
    """Landlock bound to one run's confinement."""

    confinement: Confinement
    name: str = "landlock"
    private_network: bool = False

    def wrap(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> Wrapped:
        tmp, new_env, cleanup = private_tmp(env)
        writable = [str(p) for p in (*self.confinement.writable, tmp, Path("/dev/shm"))]
        rules = {
            "writable": writable,
            "files": list(_DEV_FILES),
            "network": self.confinement.network,
        }
        if self.confinement.way_out is not None:
            rules["connect"] = [self.confinement.way_out.port]
        # Landlock cannot take back a right granted on a parent, so the read-only
        # directories inside the workdir (.git, the state) stay writable here.
        args = [sys.executable, "-I", "-S", str(_EXEC), json.dumps(rules), "--", *argv]
        return Wrapped(args, new_env, cleanup)


class Landlock:
    """The Landlock backend; usable when a probe applies a ruleset successfully."""

    name = "landlock"

    def problem(self) -> str | None:
        return _probe()

    def confine(self, confinement: Confinement) -> LandlockSandbox:
        found = _probe()
        if found is not None:
            raise RuntimeError(found)
        return LandlockSandbox(confinement)


@probe_once
def _probe() -> str | None:
    """Why Landlock cannot be used here, or None (one probe per process)."""
    if not sys.platform.startswith("linux"):
        return "landlock: not Linux"
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", str(_EXEC), "--probe"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=_PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"landlock: the probe could not run: {exc}"
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        return f"landlock: not available ({lines[-1] if lines else done.returncode})"
    version = int(done.stdout.strip() or 0)
    if version < 4:
        return f"landlock: ABI {version} cannot refuse network connections (4 needed)"
    return None
