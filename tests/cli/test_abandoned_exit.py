"""A process whose foreign runtime cannot end cleanly (Ray's exit handler waiting on a
frozen head) ends at once with the exit code it was leaving with, its output flushed and
no exit handler run. Real subprocesses: exit handlers and ``os._exit`` are process-wide."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from looprun.system.abandon import exit_status

PROGRAM = """
import atexit, pathlib, sys
from looprun.system.abandon import abandon_at_exit, exit_now_if_abandoned, skip_exit_handler
marker = pathlib.Path(sys.argv[1])
atexit.register(marker.write_text, "an exit handler ran")
def slow_disconnect():
    marker.with_name("skipped").write_text("the skipped handler ran")
atexit.register(slow_disconnect)
if sys.argv[2] == "skip":
    skip_exit_handler(slow_disconnect)
print("summary on stdout", end="")  # left in the buffer: a pipe is not a terminal
sys.stderr.write("verdict on stderr")
if sys.argv[2] == "abandon":
    abandon_at_exit("the head is frozen")
try:
    sys.exit(int(sys.argv[3]) if sys.argv[3].isdigit() else sys.argv[3])
except SystemExit as exc:
    exit_now_if_abandoned(exc.code)
    raise
"""


def _run(tmp_path: Path, mode: str, code: str) -> tuple[subprocess.CompletedProcess, Path]:
    marker = tmp_path / "marker"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(marker), mode, code],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    return done, marker


def test_an_abandoned_process_ends_with_its_code_and_output_but_no_exit_handler(
    tmp_path: Path,
) -> None:
    done, marker = _run(tmp_path, "abandon", "130")
    assert done.returncode == 130
    assert done.stdout == "summary on stdout"
    assert done.stderr == "verdict on stderr"
    assert not marker.exists()


def test_a_text_exit_code_is_still_printed_and_ends_with_1(tmp_path: Path) -> None:
    done, marker = _run(tmp_path, "abandon", "looprun: stopped")
    assert done.returncode == 1
    assert done.stderr == "verdict on stderrlooprun: stopped\n"
    assert not marker.exists()


def test_without_an_abandon_the_exit_handlers_run(tmp_path: Path) -> None:
    done, marker = _run(tmp_path, "keep", "130")
    assert done.returncode == 130 and done.stdout == "summary on stdout"
    assert marker.read_text() == "an exit handler ran"


@pytest.mark.parametrize("code", ["0", "130", "looprun: stopped"])
def test_a_skipped_exit_handler_alone_does_not_run(tmp_path: Path, code: str) -> None:
    """Ray's disconnect at exit is skipped once the run is recorded; every other exit
    handler runs, and the code and output are the ones the usual exit gives."""
    done, marker = _run(tmp_path, "skip", code)
    assert done.returncode == exit_status(int(code) if code.isdigit() else code)
    assert done.stdout == "summary on stdout"
    assert done.stderr == "verdict on stderr" + ("" if code.isdigit() else f"{code}\n")
    assert marker.read_text() == "an exit handler ran"
    assert not (tmp_path / "skipped").exists()
    (tmp_path / "kept").mkdir()
    _run(tmp_path / "kept", "keep", code)  # the same handler, not skipped: it runs
    assert (tmp_path / "kept" / "skipped").read_text() == "the skipped handler ran"


@pytest.mark.parametrize(("code", "status"), [(None, 0), (0, 0), (130, 130), (256, 0), ("x", 1)])
def test_the_exit_status_is_the_one_sys_exit_gives(code: object, status: int) -> None:
    assert exit_status(code) == status
