"""A multi-node Ray cluster on 127.0.0.1, one host, started and ended by its own PIDs.

Each node is ``ray start --block`` in a process group of its own, sharing one short
``--temp-dir``; its raylet starts the node's workers, each in a process group of its own.
Freezing or killing a node signals the node's group and its raylet's workers, never
another node's processes and never ``ray stop`` (which ends every Ray process here).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.cli import cli_env, scripted_run

RAY = str(Path(sys.executable).parent / "ray")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (a raylet's are its workers and agents)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(entry))
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


@dataclass
class Node:
    name: str
    proc: subprocess.Popen
    log: list[str] = field(default_factory=list)

    @property
    def pgid(self) -> int:
        return self.proc.pid

    def raylet(self) -> int | None:
        for pid in _children(self.proc.pid):
            if "raylet/raylet" in _cmdline(pid):
                return pid
        return None

    def workers(self) -> list[int]:
        """The node's worker processes (each in a group of its own)."""
        raylet = self.raylet()
        return [] if raylet is None else _children(raylet)

    def signal(self, sig: int) -> None:
        """``sig`` to every process of the node: its group, and each worker's group."""
        workers = self.workers()
        _signal_group(self.pgid, sig)
        for pid in workers:
            _signal_group(os.getpgid(pid) if _alive(pid) else pid, sig)

    def runs(self, pid: int) -> bool:
        return pid in self.workers()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


class LocalCluster:
    """A head with no CPU (the driver's node: its GCS and the progress board) and
    worker nodes of one CPU each, where the sub-loops run."""

    def __init__(self) -> None:
        self.temp = tempfile.mkdtemp(prefix="lr-rc-")  # short: Ray's socket paths have a limit
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.env = dict(os.environ, RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
        self.env.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)  # "0" refuses a second node
        self.env.pop("RAY_ADDRESS", None)
        # workers find python, pytest and ruff where the tests found them
        self.env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + self.env["PATH"]
        self.nodes: list[Node] = []
        self.head = self._start(
            "head", "--head", f"--port={self.port}", "--num-cpus=0", "--include-dashboard=false"
        )

    def add_nodes(self, count: int, cpus: int = 1) -> list[Node]:
        """Worker nodes of ``cpus`` CPUs each, started one after the other (side by side,
        one of them may time out registering on a loaded host)."""
        return [
            self._start(f"node{len(self.nodes)}", f"--address={self.address}", f"--num-cpus={cpus}")
            for _ in range(count)
        ]

    def _start(self, name: str, *args: str) -> Node:
        node = self._spawn(name, *args)
        self._ready(node)
        return node

    def _spawn(self, name: str, *args: str) -> Node:
        proc = subprocess.Popen(
            [
                RAY,
                "start",
                *args,
                "--node-ip-address=127.0.0.1",
                f"--temp-dir={self.temp}",
                "--block",
            ],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        node = Node(name, proc)
        self.nodes.append(node)
        return node

    def _ready(self, node: Node, timeout: float = 120) -> None:
        """Read the node's output until Ray says it runs; keep reading it after."""
        assert node.proc.stdout is not None
        started = threading.Event()

        def read() -> None:
            assert node.proc.stdout is not None
            for line in node.proc.stdout:
                node.log.append(line)
                if "Ray runtime started" in line:
                    started.set()
            started.set()  # it ended: say why below

        threading.Thread(target=read, daemon=True).start()
        if not started.wait(timeout) or node.proc.poll() is not None:
            raise AssertionError(f"{node.name} did not start:\n{''.join(node.log)}")

    def node_of(self, worker_pid: int) -> Node:
        """The node whose raylet runs ``worker_pid``."""
        for node in self.nodes:
            if node.runs(worker_pid):
                return node
        raise AssertionError(f"pid {worker_pid} runs on no node of this cluster")

    def kill(self, node: Node) -> None:
        node.signal(signal.SIGKILL)
        node.proc.wait(timeout=30)

    def close(self) -> None:
        """SIGKILL every node's processes (thawed first), then remove the temp dir."""
        for node in self.nodes:
            workers = node.workers()
            for pid in workers:
                _signal_group(pid, signal.SIGCONT)
            _signal_group(node.pgid, signal.SIGCONT)
            node.signal(signal.SIGKILL)
            for pid in workers:
                _signal_group(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        for node in self.nodes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                node.proc.wait(timeout=max(1, deadline - time.monotonic()))
        left = self.processes()
        while left and time.monotonic() < deadline + 10:  # SIGKILLed, some still exiting
            time.sleep(0.5)
            left = self.processes()
        shutil.rmtree(self.temp, ignore_errors=True)
        assert not left, f"processes of the test cluster outlived it: {left}"

    def processes(self) -> list[str]:
        """Processes still running that belong to this cluster (named by its temp dir
        or port, or in a node's group)."""
        out = subprocess.run(["ps", "-eo", "pid,pgid,args"], capture_output=True, text=True)
        groups = {str(n.pgid) for n in self.nodes}
        rows = []
        for line in out.stdout.splitlines()[1:]:
            parts = line.split(None, 2)
            if len(parts) < 3 or parts[2].endswith("<defunct>"):  # ended, not yet reaped
                continue
            if parts[1] in groups or self.temp in parts[2] or f":{self.port}" in parts[2]:
                rows.append(line)
        return rows


def start_run(
    template: str,
    intent: str,
    work: Path,
    script: Path,
    address: str,
    env: dict[str, str] | None = None,
    *,
    as_json: bool = True,
) -> subprocess.Popen:
    """A scripted run of ``template`` on the cluster at ``address``, in a process group
    of its own (as a shell starts it), its output piped."""
    return subprocess.Popen(
        [
            *[sys.executable, "-m", "looprun"],
            *scripted_run(template, intent=intent, workdir=work, script=script),
            *["--executor", f"ray:{address}"],
            *(["--json"] if as_json else []),
        ],
        cwd=work,
        env=cli_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def finish(proc: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """(stdout, the rest of stderr) once the run ends, killed after ``timeout``. Not
    ``communicate()``: it reads the pipes directly, losing what readline has buffered."""
    assert proc.stdout is not None and proc.stderr is not None
    timer = threading.Timer(timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
    timer.start()
    try:
        err = proc.stderr.read()  # stdout holds one summary: it never fills its pipe
        out = proc.stdout.read()
        proc.wait()
    finally:
        timer.cancel()
    return out, err


def run_dir_of(work: Path) -> Path:
    """The one run directory of ``work``."""
    return next((work / ".looprun" / "runs").iterdir())
