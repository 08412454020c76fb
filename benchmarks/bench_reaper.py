"""What the reaper costs a command that runs under it (without a sandbox, under Landlock),
against the command itself. (Under bubblewrap a command's PID namespace does that work,
with no process of its own: ``system/pidns.py``.)

    python benchmarks/bench_reaper.py [--runs 40]

Times, as medians in milliseconds: ``/bin/sh -c true`` started directly (what a command
cost before), the same under the reaper (its interpreter start, the ``/proc`` scan after
the command), ``run_process`` end to end (the reaper included), and, as the yardstick,
one real check: ``python -m pytest -q`` on a two-test suite through ``run_process``.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from timing import median_ms

from looprun.system.proc import _REAPER, run_process

SUITE = "def test_a():\n    assert 1\n\n\ndef test_b():\n    assert 2\n"


def _under_reaper(argv: list[str]) -> None:
    verdict, end = socket.socketpair()
    with verdict, end:
        command = [sys.executable, "-I", "-S", str(_REAPER), str(end.fileno()), "--", *argv]
        subprocess.run(command, pass_fds=(end.fileno(),), check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    runs = parser.parse_args().runs
    shell = ["/bin/sh", "-c", "true"]
    bare = median_ms(lambda: subprocess.run(shell, check=True), runs)
    reaped = median_ms(lambda: _under_reaper(shell), runs)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "test_two.py").write_text(SUITE)
        whole = median_ms(lambda: run_process("true", cwd=work, timeout_s=60, shell=True), runs)
        check = f"{sys.executable} -m pytest -q -p no:cacheprovider"
        pytest_ms = median_ms(
            lambda: run_process(check, cwd=work, timeout_s=60, shell=True), max(runs // 4, 3)
        )
    print(f"sh -c true, started directly:  {bare:.1f} ms")
    print(f"sh -c true, under the reaper:  {reaped:.1f} ms")
    print(f"reaper cost per command:       {reaped - bare:.1f} ms")
    print(f"run_process('true'):           {whole:.1f} ms")
    print(f"one pytest check (run_process): {pytest_ms:.1f} ms")
    print(f"reaper share of that check:    {(reaped - bare) / pytest_ms:.1%}")


if __name__ == "__main__":
    main()
