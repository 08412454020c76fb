"""Under Landlock, the process that reaps what a command leaves running stays outside the
command's domain, through the real CLI: an observer that double-forks a daemon and then
kills its own reaper (``SIGKILL`` to the ``landlock_exec.py`` ancestor) is refused, and
the daemon dies with the command instead of writing its marker later. When the reaper
was inside the domain, the kill worked and the daemon outlived the run.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml
from tests.support.cli import looprun
from tests.support.git_repos import git_repo

from looprun.sandbox.landlock import Landlock

LANDLOCK_PROBLEM = Landlock().problem()
pytestmark = pytest.mark.skipif(
    LANDLOCK_PROBLEM is not None, reason=f"no usable Landlock here: {LANDLOCK_PROBLEM}"
)

KILL_REAPER = """\
import os, sys, time

marker = os.path.abspath("leftover.txt")
ready = os.path.abspath("daemon.ready")


def reaper():
    pid = os.getppid()
    while pid > 1:
        if b"landlock_exec" in open(f"/proc/{pid}/cmdline", "rb").read():
            return pid
        pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    sys.exit("no landlock_exec.py among my ancestors")


if os.fork() == 0:  # a double-forked daemon in its own session, detached from the output
    os.setsid()
    os.fork() and os._exit(0)
    [os.dup2(os.open(os.devnull, os.O_RDWR), fd) for fd in (0, 1, 2)]
    open(ready, "w").close()
    time.sleep(1.5)  # long after the command is gone
    open(marker, "w").write("the daemon outlived its command")
    os._exit(0)
while not os.path.exists(ready):
    time.sleep(0.02)
target = reaper()
try:
    os.kill(target, 9)
    print("killed the reaper", flush=True)
except OSError as exc:
    print("cannot kill the reaper:", exc, flush=True)
time.sleep(0.3)
"""

TEMPLATE = """\
looprun: 1
name: reaper
inputs:
  intent: {type: string, required: true}
act:
  prompt: "{{ task.goal }}"
  tools: [run]
observe:
  escape:
    run: python3 kill_reaper.py
    parser: exit_code
exit: [escape.ok]
limits: {max_iterations: 1}
"""


def test_a_command_cannot_kill_its_landlock_reaper_and_its_daemon_dies(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "kill_reaper.py").write_text(KILL_REAPER)
    (work / ".gitignore").write_text("leftover.txt\ndaemon.ready\n")
    git_repo(work)
    (tmp_path / "t.yaml").write_text(TEMPLATE)
    (tmp_path / "script.yaml").write_text(yaml.safe_dump([{"text": "ok"}]))
    proc = looprun(
        "run", "--sandbox", "required", str(tmp_path / "t.yaml"), "--intent", "escape",
        "--workdir", str(work), "--model", f"script:{tmp_path / 'script.yaml'}", "--json",
        cwd=tmp_path, env={"LOOPRUN_SANDBOX_BACKENDS": "landlock"},
    )  # fmt: skip
    assert proc.stdout.strip(), proc.stderr
    run_dir = Path(json.loads(proc.stdout)["run_dir"])
    record = json.loads((run_dir / "observe" / "1.json").read_text())["observers"]["escape"]
    time.sleep(2.0)  # the daemon's marker is due 1.5 s after it started
    assert not (work / "leftover.txt").exists(), record
    assert "cannot kill the reaper: [Errno 1] Operation not permitted" in record["output_tail"]
    assert "landlock: killed 1 process(es) the command left running" in record["output_tail"]
    assert record["exit_code"] == 0
