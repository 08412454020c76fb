"""The OS sandbox, through the real CLI: observers and the model's ``run`` commands cannot
write outside the workdir, read looprun's environment through ``/proc``, connect to a
listener on 127.0.0.1 or leave a daemon behind; with ``--sandbox off`` they can do all
but the last (the documented difference). Where no backend works, ``required`` stops before anything
starts and ``auto`` says so once.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.support.cli import looprun
from tests.support.git_repos import git_repo

from looprun.sandbox import Confinement, SandboxUnavailable, pick
from looprun.sandbox.bwrap import Bubblewrap
from looprun.sandbox.landlock import Landlock

BWRAP_PROBLEM = Bubblewrap().problem()
needs_bwrap = pytest.mark.skipif(
    BWRAP_PROBLEM is not None, reason=f"no working bubblewrap here: {BWRAP_PROBLEM}"
)

LANDLOCK_PROBLEM = Landlock().problem()
needs_landlock = pytest.mark.skipif(
    LANDLOCK_PROBLEM is not None, reason=f"no usable Landlock here: {LANDLOCK_PROBLEM}"
)

ENVIRON_SCAN = """\
import glob, sys
canary = sys.argv[1].encode()
found = []
for path in glob.glob("/proc/[0-9]*/environ"):
    try:
        with open(path, "rb") as f:
            if canary in f.read():
                found.append(path)
    except OSError:
        pass
print("readable:", found)
sys.exit(1 if found else 0)
"""

CONNECT = """\
import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=3).close()
except OSError as exc:
    print("refused:", exc)
    sys.exit(0)
print("connected")
sys.exit(1)
"""

WRITE = """\
import sys
# the model's command names no outside path (the policy would refuse it): its script does
target = sys.argv[1] if len(sys.argv) > 1 else open("tool-target.txt").read()
try:
    open(target, "w").write("escaped\\n")
except OSError as exc:
    print("refused:", exc)
    sys.exit(0)
print("written")
sys.exit(1)
"""

DAEMON = """\
import os, sys, time
where = sys.argv[1]  # the run's artifacts: outside the tree, so no rollback removes them
if os.fork():
    for _ in range(100):  # return once the daemon is up, so that it surely started
        if os.path.exists(os.path.join(where, "daemon.pid")):
            break
        time.sleep(0.05)
    sys.exit(0)
os.setsid()
if os.fork():
    os._exit(0)
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
with open(os.path.join(where, "daemon.pid"), "w") as f:
    f.write(str(os.getpid()))
for beat in range(600):
    with open(os.path.join(where, "heartbeat.txt"), "w") as f:
        f.write(str(beat))
    time.sleep(0.1)
"""

INSIDE = """\
import os, sys, tempfile
problems = []
for path in ("in-workdir.txt", os.path.join(tempfile.gettempdir(), "t.txt"), sys.argv[1]):
    try:
        open(path, "w").write("ok")
    except OSError as exc:
        problems.append(f"cannot write {path}: {exc}")
for path in (".git/escaped", ".looprun/escaped"):
    try:
        open(path, "w").write("x")
        problems.append(f"wrote {path}")
    except OSError:
        pass
print(tempfile.gettempdir())
print(problems)
sys.exit(1 if problems else 0)
"""


class Listener:
    """A TCP listener on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


@dataclass
class Run:
    """One finished CLI run of the probe template and what it left behind."""

    proc: Any
    summary: dict[str, Any]
    work: Path
    outside: Path
    listener: Listener
    canary: str

    def observed(self, name: str) -> dict[str, Any]:
        record = json.loads((Path(self.summary["run_dir"]) / "observe" / "1.json").read_text())
        return record["observers"][name]

    def events(self, kind: str) -> list[dict[str, Any]]:
        return _journal(self.summary, kind)

    @property
    def artifacts(self) -> Path:
        return Path(self.summary["run_dir"]) / "artifacts"

    @property
    def sandbox(self) -> dict[str, Any]:
        return _journal(self.summary, "run_started")[0]["sandbox"]


def _head(name: str, sandbox: str) -> str:
    """A template up to its observers: the model may run ``python3`` commands."""
    return f"""\
looprun: 1
name: {name}
sandbox: {sandbox}
inputs:
  intent: {{type: string, required: true}}
act:
  prompt: "{{{{ task.goal }}}}"
  tools: [run]
  constraints:
    commands: {{allow: ["python3 *"]}}
"""


def _journal(summary: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    lines = (Path(summary["run_dir"]) / "journal.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == kind]


def _template(sandbox: str, outside: Path, port: int, canary: str) -> str:
    return (
        _head("contained", sandbox)
        + f"""\
observe:
  write_outside:
    run: python3 write.py {outside / "from-observer.txt"}
    parser: exit_code
  environ:
    run: python3 environ_scan.py {canary}
    parser: exit_code
  network:
    run: python3 connect.py {port}
    parser: exit_code
  daemon:
    run: "python3 daemon.py {{{{ run.artifacts }}}}"
    parser: exit_code
  inside:
    run: "python3 inside.py {{{{ run.artifacts }}}}/report.txt"
    parser: exit_code
exit: [write_outside.ok, environ.ok, network.ok, inside.ok]
limits: {{max_iterations: 1}}
"""
    )


def probe_run(root: Path, sandbox: str, *cli: str, env: dict[str, str] | None = None) -> Run:
    """The probe template run once in a fresh repository, with a canary secret in
    looprun's environment and a listener on 127.0.0.1."""
    root.mkdir(parents=True, exist_ok=True)
    work, outside = root / "work", root / "outside"
    work.mkdir()
    outside.mkdir()
    for name, text in {
        "environ_scan.py": ENVIRON_SCAN,
        "connect.py": CONNECT,
        "write.py": WRITE,
        "daemon.py": DAEMON,
        "inside.py": INSIDE,
    }.items():
        (work / name).write_text(text)
    (work / "tool-target.txt").write_text(str(outside / "from-tool.txt"))
    (work / ".gitignore").write_text("daemon.pid\nheartbeat.txt\n")
    git_repo(work)
    listener = Listener()
    canary = f"canary-{uuid.uuid4().hex}"
    (root / "t.yaml").write_text(_template(sandbox, outside, listener.port, canary))
    turn = {"name": "run", "arguments": {"command": "python3 write.py"}}
    (root / "script.yaml").write_text(yaml.safe_dump([{"tool_calls": [turn]}, {"text": "ok"}]))
    proc = looprun(
        "run",
        *cli,
        str(root / "t.yaml"),
        "--intent",
        "probe the boundaries",
        "--workdir",
        str(work),
        "--model",
        f"script:{root / 'script.yaml'}",
        "--json",
        cwd=root,
        env={"PROBE_API_KEY": canary, **(env or {})},
    )
    assert proc.stdout.strip(), proc.stderr
    return Run(proc, json.loads(proc.stdout), work, outside, listener, canary)


def _stop_daemon(run: Run) -> None:
    """An unconfined daemon is the documented difference: end it after looking."""
    pid_file = run.artifacts / "daemon.pid"
    if run.summary and pid_file.is_file():
        pid = int(pid_file.read_text())
        try:
            if Path(f"/proc/{pid}/cwd").resolve() == run.work:
                os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, FileNotFoundError):
            pass


@pytest.fixture(scope="module")
def confined(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    if BWRAP_PROBLEM is not None:
        pytest.skip(f"no working bubblewrap here: {BWRAP_PROBLEM}")
    run = probe_run(tmp_path_factory.mktemp("confined"), "off", "--sandbox", "required")
    yield run
    run.listener.close()


@pytest.fixture(scope="module")
def unconfined(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    run = probe_run(tmp_path_factory.mktemp("unconfined"), "required", "--sandbox", "off")
    yield run
    run.listener.close()
    _stop_daemon(run)


def _heartbeats(run: Run, wait_s: float = 1.0) -> tuple[str, str]:
    beat = run.artifacts / "heartbeat.txt"
    before = beat.read_text() if beat.exists() else ""
    time.sleep(wait_s)
    return before, beat.read_text() if beat.exists() else ""


# -- with the sandbox ------------------------------------------------------------------------


@needs_bwrap
def test_the_command_line_wins_over_the_template_and_the_journal_says_which(
    confined: Run,
) -> None:
    assert confined.sandbox == {"mode": "required", "backend": "bwrap", "network": False}


@needs_bwrap
def test_a_sandboxed_observer_and_model_command_cannot_write_outside_the_workdir(
    confined: Run,
) -> None:
    obs = confined.observed("write_outside")
    assert obs["exit_code"] == 0 and "Read-only file system" in obs["output_tail"]
    assert not list(confined.outside.iterdir())
    [call] = [e for e in confined.events("tool_call") if e["tool"] == "run"]
    assert "refused: [Errno 30] Read-only file system" in json.dumps(call)


@needs_bwrap
def test_a_sandboxed_observer_cannot_read_the_environment_of_looprun(confined: Run) -> None:
    obs = confined.observed("environ")
    assert (obs["exit_code"], obs["output_tail"].strip()) == (0, "readable: []")


@needs_bwrap
def test_a_sandboxed_observer_cannot_connect_to_a_listener_on_loopback(confined: Run) -> None:
    obs = confined.observed("network")
    assert obs["exit_code"] == 0 and "refused" in obs["output_tail"], obs
    assert confined.listener.accepted == 0


@needs_bwrap
def test_a_setsid_daemon_does_not_survive_its_sandboxed_command(confined: Run) -> None:
    assert confined.observed("daemon")["exit_code"] == 0
    assert (confined.artifacts / "daemon.pid").is_file()  # it did start
    before, after = _heartbeats(confined)
    assert before == after, "the daemon is still writing its heartbeat"


@needs_bwrap
def test_the_workdir_temp_and_artifacts_are_writable_but_git_and_state_are_not(
    confined: Run,
) -> None:
    obs = confined.observed("inside")
    tmp, problems = obs["output_tail"].strip().splitlines()
    assert (obs["exit_code"], problems) == (0, "[]")
    artifacts = Path(confined.summary["run_dir"]) / "artifacts"
    assert (artifacts / "report.txt").read_text() == "ok"
    assert not (confined.work / ".git" / "escaped").exists()
    assert Path(tmp).name.startswith("looprun-tmp-")
    assert not Path(tmp).exists()  # the private temp dir went with the command


# -- with the Landlock fallback: writes, TCP and leftovers ----------------------------------


@pytest.fixture(scope="module")
def landlocked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    if LANDLOCK_PROBLEM is not None:
        pytest.skip(f"no usable Landlock here: {LANDLOCK_PROBLEM}")
    root = tmp_path_factory.mktemp("landlocked")
    only = {"LOOPRUN_SANDBOX_BACKENDS": "landlock"}
    run = probe_run(root, "off", "--sandbox", "required", env=only)
    yield run
    run.listener.close()


@needs_landlock
def test_landlock_refuses_writes_outside_and_tcp_and_ends_leftovers(landlocked: Run) -> None:
    assert landlocked.sandbox["backend"] == "landlock"
    write = landlocked.observed("write_outside")
    assert write["exit_code"] == 0 and "Permission denied" in write["output_tail"]
    assert not list(landlocked.outside.iterdir())  # neither the observer nor the tool wrote
    network = landlocked.observed("network")
    assert network["exit_code"] == 0 and landlocked.listener.accepted == 0
    before, after = _heartbeats(landlocked)
    assert (landlocked.artifacts / "daemon.pid").is_file() and before == after


@needs_landlock
def test_landlock_leaves_the_workdir_temp_and_artifacts_writable(landlocked: Run) -> None:
    tmp, problems = landlocked.observed("inside")["output_tail"].strip().splitlines()
    # what it cannot do, as documented: .git and the state stay writable under Landlock
    assert problems == "['wrote .git/escaped', 'wrote .looprun/escaped']"
    assert not Path(tmp).exists()


# -- without it: the documented difference -----------------------------------------------


def test_without_the_sandbox_commands_write_outside(unconfined: Run) -> None:
    assert unconfined.observed("write_outside")["exit_code"] == 1
    assert sorted(p.name for p in unconfined.outside.iterdir()) == [
        "from-observer.txt",
        "from-tool.txt",
    ]
    assert unconfined.sandbox == {"mode": "off", "backend": None, "network": False}


def test_without_the_sandbox_the_environment_of_looprun_is_readable(unconfined: Run) -> None:
    obs = unconfined.observed("environ")
    assert obs["exit_code"] == 1 and "/environ" in obs["output_tail"]


def test_without_the_sandbox_loopback_is_reachable_but_daemons_still_die(
    unconfined: Run,
) -> None:
    """The network is the documented difference; a daemon is not: every command's
    reaper kills what it leaves running, sandbox or not."""
    assert unconfined.observed("network")["exit_code"] == 1
    assert unconfined.listener.accepted >= 1
    daemon = unconfined.observed("daemon")
    assert (unconfined.artifacts / "daemon.pid").is_file()  # it did start
    before, after = _heartbeats(unconfined)
    assert before == after, "the daemon is still writing its heartbeat"
    assert "left 1 process(es) running" in daemon["feedback"]


# -- choosing the sandbox ---------------------------------------------------------------------


def _bin_without_bwrap(tmp_path: Path) -> str:
    """A PATH with git, sh and this Python but no bwrap: a host without the sandbox."""
    import shutil

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("git", "sh"):
        found = shutil.which(name)
        assert found is not None
        (bin_dir / name).symlink_to(found)
    (bin_dir / "python3").symlink_to(sys.executable)
    return str(bin_dir)


def _no_bwrap(tmp_path: Path) -> dict[str, str]:
    """The environment of a host without bubblewrap, where only it would be tried."""
    return {"PATH": _bin_without_bwrap(tmp_path), "LOOPRUN_SANDBOX_BACKENDS": "bwrap"}


SIMPLE = """\
observe:
  one: {run: "python3 -c 'print(1)'", parser: exit_code}
  two: {run: "python3 -c 'print(2)'", parser: exit_code}
exit: [one.ok, two.ok]
limits: {max_iterations: 2}
"""


def _simple(tmp_path: Path, sandbox: str) -> tuple[Path, list[str]]:
    work = git_repo(tmp_path / "work")
    (tmp_path / "t.yaml").write_text(_head("simple", sandbox) + SIMPLE)
    turn = {"name": "run", "arguments": {"command": "python3 -c 'print(3)'"}}
    (tmp_path / "script.yaml").write_text(yaml.safe_dump([{"tool_calls": [turn]}, {"text": "k"}]))
    args = ["--intent", "x", "--workdir", str(work), "--model", f"script:{tmp_path}/script.yaml"]
    return work, [str(tmp_path / "t.yaml"), *args, "--json"]


def test_required_without_a_sandbox_stops_before_anything_starts(tmp_path: Path) -> None:
    work, args = _simple(tmp_path, "required")
    # a model that would fail differently (exit 1) if it were ever called
    model = ["--model", "openai:gpt-4o-mini", "--base-url", "http://127.0.0.1:9/v1"]
    proc = looprun(
        *args,
        *model,
        cwd=tmp_path,
        env={**_no_bwrap(tmp_path), "OPENAI_API_KEY": "sk-test-123456789"},
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "sandbox: required, but no OS sandbox works here: bwrap is not installed" in proc.stderr
    assert not (work / ".looprun" / "runs").exists()


def test_the_command_line_can_require_what_the_template_turns_off(tmp_path: Path) -> None:
    _, args = _simple(tmp_path, "'off'")
    proc = looprun(
        "run",
        "--sandbox",
        "required",
        *args,
        cwd=tmp_path,
        env=_no_bwrap(tmp_path),
    )
    assert proc.returncode == 2 and "sandbox: required" in proc.stderr


def test_auto_without_a_sandbox_says_so_once_and_runs(tmp_path: Path) -> None:
    _, args = _simple(tmp_path, "auto")
    proc = looprun(*args, cwd=tmp_path, env=_no_bwrap(tmp_path))
    assert proc.returncode == 0, proc.stderr
    notes = [line for line in proc.stderr.splitlines() if "without an OS sandbox" in line]
    assert notes == [
        "note: commands run without an OS sandbox (bwrap is not installed "
        "(Debian/Ubuntu: apt-get install bubblewrap))"
    ]
    [started] = _journal(json.loads(proc.stdout), "run_started")
    assert started["sandbox"] == {"mode": "auto", "backend": None, "network": False}


@needs_bwrap
def test_the_command_line_can_turn_off_what_the_template_requires(tmp_path: Path) -> None:
    _, args = _simple(tmp_path, "required")
    proc = looprun("run", "--sandbox", "off", *args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    [started] = _journal(json.loads(proc.stdout), "run_started")
    assert started["sandbox"] == {"mode": "off", "backend": None, "network": False}
    assert "without an OS sandbox" not in proc.stderr  # off is a choice, not a surprise


class _Broken:
    name = "broken"

    def problem(self) -> str | None:
        return "it cannot work here"

    def confine(self, confinement: Confinement) -> Any:
        raise AssertionError("never confined")


def test_auto_notes_each_problem_once_per_process_and_required_raises() -> None:
    said: list[str] = []
    assert pick("auto", said.append, [_Broken()]) is None
    assert pick("auto", said.append, [_Broken()]) is None
    assert said == ["note: commands run without an OS sandbox (it cannot work here)"]
    assert pick("off", said.append, [_Broken()]) is None
    with pytest.raises(SandboxUnavailable) as caught:
        pick("required", said.append, [_Broken()])
    assert caught.value.exit_code == 2
    assert (
        str(caught.value) == "sandbox: required, but no OS sandbox works here: it cannot work here"
    )


HANG = """\
import os, subprocess, sys, time
if os.fork() == 0:
    os.setsid()
    for beat in range(600):
        open("heartbeat.txt", "w").write(str(beat))
        time.sleep(0.1)
    os._exit(0)
time.sleep(300)
"""


@needs_bwrap
def test_a_timeout_in_the_sandbox_ends_everything_the_command_started(tmp_path: Path) -> None:
    work, args = _simple(tmp_path, "required")
    (work / "hang.py").write_text(HANG)
    turn = {"name": "run", "arguments": {"command": "python3 hang.py"}}
    (tmp_path / "script.yaml").write_text(yaml.safe_dump([{"tool_calls": [turn]}, {"text": "k"}]))
    text = (tmp_path / "t.yaml").read_text().replace("max_iterations: 2", "timeout: 3s")
    (tmp_path / "t.yaml").write_text(text)
    started = time.monotonic()
    proc = looprun(*args, cwd=tmp_path)
    assert time.monotonic() - started < 60
    assert (proc.returncode, json.loads(proc.stdout)["code"]) == (3, "timeout"), proc.stderr
    beat = work / "heartbeat.txt"
    assert beat.is_file()
    before = beat.read_text()
    time.sleep(1.0)
    assert beat.read_text() == before, "the setsid child outlived the timeout"


@needs_bwrap
def test_a_missing_program_is_reported_as_such_in_the_sandbox(tmp_path: Path) -> None:
    from looprun.act.tools import Toolbox
    from looprun.models.base import ToolCall
    from looprun.sandbox.bwrap import Bubblewrap
    from looprun.template.model import Constraints

    work = git_repo(tmp_path / "work")
    sandbox = Bubblewrap().confine(Confinement(writable=(work,)))
    constraints = Constraints(commands=("no-such-program *", "./*"))
    tools = Toolbox(work, constraints, ["run"], sandbox=sandbox)
    (work / "script.sh").write_text("#!/bin/sh\necho hi\n")
    missing = tools.call(ToolCall("1", "run", {"command": "no-such-program x"}))
    not_executable = tools.call(ToolCall("2", "run", {"command": "./script.sh"}))
    assert (missing.is_error, missing.content) == (
        True,
        "error: command not found: no-such-program",
    )
    assert (not_executable.is_error, not_executable.content) == (
        True,
        "error: not executable: ./script.sh",
    )


@needs_bwrap
def test_looprun_observe_runs_its_command_in_the_sandbox(tmp_path: Path) -> None:
    work = git_repo(tmp_path / "work")
    outside = tmp_path / "outside.txt"
    command = f"python3 -c \"open('report.txt', 'w').write('1'); open('{outside}', 'w')\""
    proc = looprun("observe", "exit_code", "--run", command, "--sandbox", "required", cwd=work)
    facts = json.loads(proc.stdout)
    assert proc.returncode == 1 and "Read-only file system" in facts["output_tail"]
    assert (work / "report.txt").read_text() == "1" and not outside.exists()
    proc = looprun("observe", "exit_code", "--run", command, "--sandbox", "off", cwd=work)
    assert proc.returncode == 0 and outside.exists()


# -- credential stores ------------------------------------------------------------------------

READ_SECRETS = """\
import sys
# the model's command names no outside path (the policy would refuse it): its file does
paths = sys.argv[1:] or open("secret-paths.txt").read().split()
readable = []
for path in paths:
    try:
        with open(path) as f:
            if "canary" in f.read():
                readable.append(path)
    except OSError:
        pass
print("readable:", readable)
sys.exit(1 if readable else 0)
"""

SECRETS = {
    ".ssh/id_ed25519": "ssh key",
    ".aws/credentials": "aws key",
    ".netrc": "netrc password",
    ".config/gh/hosts.yml": "gh token",
    "private/notes.txt": "a path the template hides",
}


def _secrets_run(tmp_path: Path, mode: str) -> tuple[dict[str, Any], str]:
    """A run whose observer and model command try to read a canary from each credential
    store of a home directory that also holds the workdir."""
    home = tmp_path / "home"
    canary = f"canary-{uuid.uuid4().hex}"
    for rel, what in SECRETS.items():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(f"{what}: {canary}\n")
    work = home / "src" / "work"
    work.mkdir(parents=True)
    (work / "read_secrets.py").write_text(READ_SECRETS)
    paths = " ".join(str(home / rel) for rel in SECRETS)
    (work / "secret-paths.txt").write_text(paths)
    git_repo(work)
    (tmp_path / "t.yaml").write_text(
        _head("secrets", f"{{mode: {mode}, hide: ['~/private']}}")
        + f"""\
observe:
  secrets: {{run: "python3 read_secrets.py {paths}", parser: exit_code}}
  writes: {{run: "python3 -c \\"open('written.txt', 'w').write('ok')\\"", parser: exit_code}}
exit: [secrets.ok, writes.ok]
limits: {{max_iterations: 1}}
"""
    )
    turn = {"name": "run", "arguments": {"command": "python3 read_secrets.py"}}
    (tmp_path / "script.yaml").write_text(yaml.safe_dump([{"tool_calls": [turn]}, {"text": "k"}]))
    proc = looprun(
        str(tmp_path / "t.yaml"),
        *("--intent", "x", "--workdir", str(work), "--json"),
        *("--model", f"script:{tmp_path / 'script.yaml'}"),
        cwd=tmp_path,
        env={"HOME": str(home)},
    )
    assert proc.stdout.strip(), proc.stderr
    return json.loads(proc.stdout), canary


@needs_bwrap
def test_credential_stores_and_hidden_paths_cannot_be_read_in_the_sandbox(
    tmp_path: Path,
) -> None:
    summary, canary = _secrets_run(tmp_path, "required")
    assert summary["outcome"] == "done", summary
    run_dir = Path(summary["run_dir"])
    observed = json.loads((run_dir / "observe" / "1.json").read_text())["observers"]
    assert observed["secrets"]["output_tail"].strip() == "readable: []"
    assert observed["writes"]["exit_code"] == 0  # the workdir inside the home stays writable
    [call] = [e for e in _journal(summary, "tool_call") if e["tool"] == "run"]
    assert "readable: []" in json.dumps(call)
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert canary not in path.read_text(errors="replace"), path


def test_without_the_sandbox_credential_stores_are_readable(tmp_path: Path) -> None:
    summary, _ = _secrets_run(tmp_path, "'off'")
    assert summary["outcome"] != "done"
    observed = json.loads((Path(summary["run_dir"]) / "observe" / "1.json").read_text())
    tail = observed["observers"]["secrets"]["output_tail"]
    assert all(rel in tail for rel in SECRETS)


def test_a_hidden_path_must_be_absolute_or_under_home(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text(
        _head("relative", "{mode: auto, hide: [/srv/keys, secrets]}") + SIMPLE
    )
    proc = looprun("validate", "t.yaml", cwd=tmp_path)
    assert proc.returncode == 2
    assert (
        "t.yaml:3:41: sandbox.hide[1]: 'secrets' is neither absolute nor under ~/" in proc.stdout
    ), proc.stdout
