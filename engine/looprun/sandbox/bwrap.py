"""The bubblewrap backend: each command in its own mount, PID, IPC, UTS and (unless the
template allows network) network namespace.

The host's root is mounted read-only; the run's writable directories and a private temp
directory are bound back writable; ``/proc`` is a fresh one for the new PID namespace,
so the command sees only its own processes; ``/dev`` is a minimal one; ``/run`` is an
empty tmpfs, so host sockets there (D-Bus, container runtimes) are out of reach; the
user's credential stores are covered by empty mounts (``hidden.py``). Every
capability is dropped. When the command exits, the namespace's init exits and the kernel
kills whatever is left in it, whether it called ``setsid`` or not; if the engine dies,
``--die-with-parent`` takes the sandbox with it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from looprun.data.value import valueclass
from looprun.sandbox.base import Confinement, Wrapped, private_tmp, probe_once

_NAMESPACES = (
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--die-with-parent",
    "--new-session",
    "--cap-drop",
    "ALL",
)
_PROBE_TIMEOUT_S = 10.0
_FORWARD = Path(__file__).with_name("forward.py")


def _mounts(confinement: Confinement, tmp: Path) -> list[str]:
    """Mount arguments, parents before children so a nested mount lands on top: a hidden
    directory becomes an empty tmpfs, a hidden file ``/dev/null``; the run's own
    directories inside a hidden one are bound back over it."""
    wanted: dict[Path, list[str]] = {}
    for path in confinement.hidden:
        if path.is_dir():
            wanted[path] = ["--tmpfs", str(path)]
        elif path.exists():
            wanted[path] = ["--ro-bind", "/dev/null", str(path)]
    for path in confinement.read_only:
        # a file too: a linked worktree's ``.git`` is one, and rewritten it would point
        # the repository's tools (and a resolver of the repository) somewhere else
        if path.exists() and not path.is_symlink():
            wanted[path] = ["--ro-bind", str(path), str(path)]
    for path in (*confinement.writable, tmp):
        if path.is_dir():
            wanted[path] = ["--bind", str(path), str(path)]
    args: list[str] = []
    for path in sorted(wanted, key=lambda p: len(p.parts)):
        args += wanted[path]
    return args


def _resolver_binds() -> list[str]:
    """With network allowed, name resolution must survive the empty ``/run``."""
    resolv = Path("/etc/resolv.conf")
    real = resolv.resolve()
    if real != resolv and real.is_relative_to("/run") and real.is_file():
        return ["--ro-bind", str(real), str(real)]
    return []


@valueclass
class BwrapSandbox:
    """bubblewrap bound to one run's confinement."""

    program: str
    confinement: Confinement
    extra: tuple[str, ...] = ()  # flags the probe found this host needs
    name: str = "bwrap"
    private_network: bool = True

    def wrap(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> Wrapped:
        tmp, new_env, cleanup = private_tmp(env)
        args = [
            self.program,
            *self.extra,
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/run",
        ]
        if self.confinement.network:
            args += _resolver_binds()
        else:
            args.append("--unshare-net")
        args += _mounts(self.confinement, tmp)
        way = self.confinement.way_out
        if way is not None and way.socket is not None and not self.confinement.network:
            # the forwarder takes the port, then becomes the command
            forward = [sys.executable, "-I", "-S", str(_FORWARD), str(way.socket), str(way.port)]
            argv = [*forward, "--", *argv]
        args += [*_NAMESPACES, "--chdir", str(cwd), "--", *argv]
        return Wrapped(args, new_env, cleanup, contains_tree=True, init_flag="--info-fd")


class Bubblewrap:
    """The bubblewrap backend; usable when a probe run inside it succeeds."""

    name = "bwrap"

    def __init__(self, program: str | None = None):
        self._program = program

    @property
    def program(self) -> str | None:
        return self._program or shutil.which("bwrap")

    def problem(self) -> str | None:
        found = _probe(self.program)
        return found if isinstance(found, str) else None

    def confine(self, confinement: Confinement) -> BwrapSandbox:
        found = _probe(self.program)
        if isinstance(found, str) or self.program is None:
            raise RuntimeError(f"bwrap cannot be used here: {found}")
        return BwrapSandbox(self.program, confinement, found)


@probe_once
def _probe(program: str | None) -> tuple[str, ...] | str:
    """The extra flags that make bwrap work on this host, or why it does not (cached:
    one probe per process). A root user in a container without the right to mount may
    still be allowed a user namespace, so that is tried second."""
    if program is None:
        return "bwrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    why = ""
    for extra in ((), ("--unshare-user",)):
        sandbox = BwrapSandbox(program, Confinement(writable=()), extra)
        wrapped = sandbox.wrap(["/bin/sh", "-c", "exit 0"], cwd=Path("/"), env={"PATH": os.defpath})
        try:
            done = subprocess.run(
                wrapped.argv,
                env=wrapped.env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=_PROBE_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bwrap could not be started: {exc}"
        finally:
            wrapped.cleanup()
        if done.returncode == 0:
            return extra
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        why = lines[-1] if lines else f"exit code {done.returncode}"
    return f"bwrap does not work here: {why}"
