"""What a command leaves running dies before the engine reads anything it wrote.

A test (or the code it runs) can start a process in a session of its own (``setsid``,
a double fork) that waits until the check has ended and then rewrites its report. Every
command runs under a small child subreaper outside the command's reach, which kills
whatever the command left behind (at its exit and at a timeout) before the engine reads
a report; a command that takes its reaper down is a check the engine does not trust.
These run the real ``run_process`` (the one place commands start) with real processes,
without a sandbox and under Landlock.
"""

from __future__ import annotations

import os
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from looprun.checks.runner import observe_command
from looprun.sandbox.base import Confinement
from looprun.sandbox.bwrap import Bubblewrap
from looprun.sandbox.landlock import Landlock
from looprun.system.proc import ProcResult, kill_groups, run_process

LANDLOCK_PROBLEM = Landlock().problem()
BWRAP_PROBLEM = Bubblewrap().problem()
KINDS = ["off", "landlock", "bwrap"]

# a double-forked daemon in a session of its own, its output detached, that writes its
# marker once the command is gone (it could as well rewrite the command's report)
DAEMON = """\
import os, sys, time
marker, ready, hang = sys.argv[1], sys.argv[2], float(sys.argv[3])
open(ready + ".ns", "w").write(os.readlink("/proc/self/ns/pid"))
if os.fork() == 0:
    os.setsid()
    os.fork() and os._exit(0)
    [os.dup2(os.open(os.devnull, os.O_RDWR), fd) for fd in (0, 1, 2)]
    open(ready + ".part", "w").write(str(os.getpid()))
    os.replace(ready + ".part", ready)
    time.sleep(1.0)
    open(marker, "w").write("outlived its command")
    os._exit(0)
while not os.path.exists(ready):
    time.sleep(0.01)
time.sleep(hang)
"""

KILL_REAPER = """\
import os, signal, time
if os.fork() == 0:
    os.setsid()
    os.fork() and os._exit(0)
    [os.dup2(os.open(os.devnull, os.O_RDWR), fd) for fd in (0, 1, 2)]
    open("ready.part", "w").write(str(os.getpid()))
    os.replace("ready.part", "ready")
    time.sleep(1.0)
    open("marker", "w").write("outlived its command")
    os._exit(0)
while not os.path.exists("ready"):
    time.sleep(0.01)
pid = os.getppid()
while pid > 1 and b"reaper_exec.py" not in open(f"/proc/{pid}/cmdline", "rb").read():
    pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
if pid > 1:  # the process that reaps what this command leaves
    os.kill(pid, signal.{SIGNAL})
time.sleep(0.3)
"""


def _sandbox(kind: str, work: Path):  # type: ignore[no-untyped-def]
    if kind == "off":
        return None
    if kind == "bwrap":
        if BWRAP_PROBLEM is not None:
            pytest.skip(f"no usable bubblewrap here: {BWRAP_PROBLEM}")
        return Bubblewrap().confine(Confinement(writable=(work,)))
    if LANDLOCK_PROBLEM is not None:
        pytest.skip(f"no usable Landlock here: {LANDLOCK_PROBLEM}")
    return Landlock().confine(Confinement(writable=(work,)))


def _gone(work: Path) -> bool:
    """Whether the daemon (its pid in ``ready``) has ended, not just been orphaned; in a
    PID namespace of its own (bubblewrap), whether nothing at all is left in it, the
    namespace's init included (the pid the daemon knows is the namespace's own)."""
    said = work / "ready.ns"
    namespace = said.read_text() if said.exists() else os.readlink("/proc/self/ns/pid")
    if namespace != os.readlink("/proc/self/ns/pid"):
        return not _in_namespace(namespace)
    pid = int((work / "ready").read_text())
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rpartition(")")[2].split()[0] in ("Z", "X")


def _in_namespace(namespace: str) -> list[int]:
    """The live processes in a PID namespace, seen from this one."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry}/ns/pid") != namespace:
                continue
            state = Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if state not in ("Z", "X"):
            found.append(int(entry))
    return found


def _daemon_command(work: Path, hang: float) -> str:
    (work / "daemon.py").write_text(DAEMON)
    return f"{sys.executable} daemon.py {work / 'marker'} {work / 'ready'} {hang}"


@pytest.mark.parametrize("kind", KINDS)
def test_a_daemon_left_at_exit_dies_before_the_engine_reads(tmp_path: Path, kind: str) -> None:
    result = run_process(
        _daemon_command(tmp_path, 0.0),
        cwd=tmp_path,
        timeout_s=30,
        shell=True,
        sandbox=_sandbox(kind, tmp_path),
    )
    assert result.exit_code == 0, result.output
    assert _gone(tmp_path) and result.supervised
    if kind != "landlock":  # that it never wrote: its marker is due 1 s after it started
        time.sleep(1.2)
        assert not (tmp_path / "marker").exists()


@pytest.mark.parametrize("kind", KINDS)
def test_a_daemon_left_at_a_timeout_dies_too(tmp_path: Path, kind: str) -> None:
    result = run_process(
        _daemon_command(tmp_path, 30.0),
        cwd=tmp_path,
        timeout_s=0.6,
        shell=True,
        sandbox=_sandbox(kind, tmp_path),
    )
    assert result.timed_out
    assert _gone(tmp_path)
    assert result.duration_s < 5


def test_the_reaper_counts_what_it_killed(tmp_path: Path) -> None:
    result = run_process(_daemon_command(tmp_path, 0.0), cwd=tmp_path, timeout_s=30, shell=True)
    assert result.leftovers == 1


def test_a_command_that_kills_its_reaper_is_not_trusted(tmp_path: Path) -> None:
    """Without a sandbox nothing stops a command from signalling its reaper; then the
    check's report is not read as a result, whatever it says."""
    (tmp_path / "kill.py").write_text(KILL_REAPER.replace("{SIGNAL}", "SIGKILL"))
    (tmp_path / "report.json").write_text("{}")
    obs = observe_command(
        "json",
        workdir=tmp_path,
        command=f"{sys.executable} kill.py; echo '{{\"ok\": true}}' > report.json",
        file=tmp_path / "report.json",
        options={"ok": "ok"},
        timeout_s=30,
    )
    assert not obs.ok
    assert "supervisor" in (obs.error or ""), obs


def test_a_signal_to_the_reaper_does_not_free_the_daemon(tmp_path: Path) -> None:
    """A signal the reaper does not use is ignored; SIGTERM stops the command, and
    everything it started, as a timeout would."""
    (tmp_path / "kill.py").write_text(KILL_REAPER.replace("{SIGNAL}", "SIGUSR1"))
    result = run_process(f"{sys.executable} kill.py", cwd=tmp_path, timeout_s=30, shell=True)
    assert (result.exit_code, result.supervised, result.leftovers) == (0, True, 1), result
    (tmp_path / "kill.py").write_text(KILL_REAPER.replace("{SIGNAL}", "SIGTERM"))
    result = run_process(f"{sys.executable} kill.py", cwd=tmp_path, timeout_s=30, shell=True)
    assert result.supervised and result.exit_code != 0, result
    assert _gone(tmp_path)


HONEST = """\
import subprocess, sys
code = "import time; time.sleep(0.2); print('child done')"
child = subprocess.Popen([sys.executable, "-c", code])
assert child.wait() == 0
print("waited")
"""


@pytest.mark.parametrize("kind", KINDS)
def test_a_command_that_waits_for_its_children_is_not_flagged(tmp_path: Path, kind: str) -> None:
    (tmp_path / "honest.py").write_text(HONEST)
    result = run_process(
        f"{sys.executable} honest.py",
        cwd=tmp_path,
        timeout_s=30,
        shell=True,
        sandbox=_sandbox(kind, tmp_path),
    )
    assert result.exit_code == 0, result.output
    assert "child done" in result.output and "waited" in result.output
    assert result.leftovers == 0
    assert result.supervised


@pytest.mark.parametrize(
    ("command", "code"),
    [("exit 3", 3), ("kill -TERM $$", -15), ("true", 0)],
)
def test_exit_statuses_pass_through_the_reaper(tmp_path: Path, command: str, code: int) -> None:
    result = run_process(command, cwd=tmp_path, timeout_s=30, shell=True)
    assert result.exit_code == code
    assert result.supervised


@pytest.mark.parametrize(("command", "code"), [("exit 3", 3), ("kill -TERM $$", 143)])
def test_exit_statuses_pass_through_a_namespace(tmp_path: Path, command: str, code: int) -> None:
    """Bubblewrap reports a command killed by a signal as 128 + the signal, as before."""
    result = run_process(
        command, cwd=tmp_path, timeout_s=30, shell=True, sandbox=_sandbox("bwrap", tmp_path)
    )
    assert (result.exit_code, result.supervised, result.leftovers) == (code, True, 0)


def test_a_missing_program_still_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        run_process(["no-such-program-here"], cwd=tmp_path, timeout_s=30)


def test_output_and_input_are_as_before(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """\
        import sys
        print("out"); print("err", file=sys.stderr)
        print(repr(sys.stdin.read()))
        """
    )
    (tmp_path / "io.py").write_text(script)
    result = run_process([sys.executable, "io.py"], cwd=tmp_path, timeout_s=30)
    assert "out" in result.output and "err" in result.output and "''" in result.output


@pytest.mark.parametrize("kind", ["off", "bwrap"])
def test_stopping_a_threads_commands_ends_their_daemons_too(tmp_path: Path, kind: str) -> None:
    """An interrupted sub-loop stops its commands through their reapers (or their
    namespaces), so what they started in sessions of their own dies with them."""
    results: list[ProcResult] = []
    command, sandbox = _daemon_command(tmp_path, 30.0), _sandbox(kind, tmp_path)
    worker = threading.Thread(
        target=lambda: results.append(
            run_process(command, cwd=tmp_path, timeout_s=60, shell=True, sandbox=sandbox)
        )
    )
    worker.start()
    deadline = time.monotonic() + 20
    while not (tmp_path / "ready").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert kill_groups({worker.ident}) == 1
    worker.join(10)
    assert not worker.is_alive() and results[0].exit_code is not None
    assert _gone(tmp_path)


def test_under_bubblewrap_its_own_ending_processes_are_no_leftovers(tmp_path: Path) -> None:
    """Bubblewrap's PID namespace ends the command's whole tree when it exits, but its
    own processes may still be ending at the reaper's first look: counted, they put a
    false "left N process(es) running" in the feedback (2 of 40 runs on a quiet machine
    before the reaper let them settle)."""
    problem = Bubblewrap().problem()
    if problem is not None:
        pytest.skip(f"no usable bubblewrap here: {problem}")
    sandbox = Bubblewrap().confine(Confinement(writable=(tmp_path,)))
    counted = [
        run_process(
            "cd . && nosuchtool -q", cwd=tmp_path, timeout_s=30, shell=True, sandbox=sandbox
        ).leftovers
        for _ in range(40)
    ]
    assert counted == [0] * 40


NAME_AN_INIT = """\
import json, os
for fd in range(3, 64):
    try:
        os.write(fd, json.dumps({"child-pid": os.getppid()}).encode())
    except OSError:
        continue
    print("wrote to", fd, os.readlink(f"/proc/self/fd/{fd}"))
open("marker", "w").write("ran")
"""


def test_a_command_cannot_name_its_own_namespace_init(tmp_path: Path) -> None:
    """Under bubblewrap the engine waits for, and at a stop kills, the init bubblewrap
    names on a pipe before the command starts: the command has no descriptor of that
    pipe to name another process on (it tries every one it may hold), and ends as an
    honest command does."""
    (tmp_path / "name.py").write_text(NAME_AN_INIT)
    result = run_process(
        [sys.executable, "name.py"],
        cwd=tmp_path,
        timeout_s=30,
        sandbox=_sandbox("bwrap", tmp_path),
    )
    assert (tmp_path / "marker").read_text() == "ran"
    assert "wrote to" not in result.output, result.output
    assert (result.exit_code, result.supervised, result.leftovers) == (0, True, 0), result
