"""Sandbox benchmark: the same observer run confined and unconfined, in fresh processes.

    python benchmarks/bench_sandbox.py [--runs 9] [--sample invoice] [--backend bwrap]

Copies a sample project to a temp directory and runs its test suite as an observer,
``looprun observe junit --run "python -m pytest ..." --file report.xml``, each time in a
fresh ``looprun`` process, alternately with ``--sandbox required`` and ``--sandbox off``
(interleaved, so a busy machine slows both alike). Prints the median wall time of each
and their ratio; the goal is a ratio of at most 1.3. A fresh process pays everything a
run pays once: start-up, the backend's probe, the sandboxed command itself.
``--backend landlock`` measures the fallback (its reaper forks the command and stays
outside the Landlock domain).

Measured on a shared, busy 2-core Linux host (kernel Landlock ABI 7), ``--runs 9``,
three invocations each: bwrap 1.03x, 1.00x, 1.21x (first: 1078 ms off, 1109 ms
confined); landlock 1.10x, 1.06x, 1.10x (first: 1156 ms off, 1273 ms confined). The
Landlock cost is one more bare interpreter start (``python -I -S``) per command; the
reaper's fork before confining adds nothing measurable.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL = 1.3


def observe_argv(sandbox: str) -> list[str]:
    command = "python -m pytest -q -p no:cacheprovider --junitxml=report.xml"
    return [
        sys.executable,
        "-m",
        "looprun",
        "observe",
        "junit",
        "--run",
        command,
        "--file",
        "report.xml",
        "--sandbox",
        sandbox,
    ]


def once(sandbox: str, workdir: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        observe_argv(sandbox), cwd=workdir, env=env, capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - start
    if '"tests":' not in done.stdout:
        sys.exit(f"the {sandbox} run did not observe the tests:\n{done.stdout}\n{done.stderr}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9, help="runs of each mode (default 9)")
    ap.add_argument("--sample", default="invoice", help="a project under samples/")
    ap.add_argument("--backend", choices=("bwrap", "landlock"), default="bwrap")
    args = ap.parse_args()

    from looprun.sandbox.bwrap import Bubblewrap
    from looprun.sandbox.landlock import Landlock

    problem = (Bubblewrap() if args.backend == "bwrap" else Landlock()).problem()
    if problem is not None:
        sys.exit(f"cannot measure: {problem}")
    env = dict(os.environ, LOOPRUN_SANDBOX_BACKENDS=args.backend)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp) / args.sample
        shutil.copytree(ROOT / "samples" / args.sample, workdir)
        times: dict[str, list[float]] = {"off": [], "required": []}
        once("off", workdir, env)  # warm the file cache for both
        for n in range(args.runs):
            order = ("off", "required") if n % 2 == 0 else ("required", "off")
            for mode in order:
                times[mode].append(once(mode, workdir, env))
    off, on = statistics.median(times["off"]), statistics.median(times["required"])
    ratio = on / off
    print(f"observer run ({args.sample} test suite, fresh looprun process), {args.runs} runs each")
    print(f"  unsandboxed  median {off * 1000:8.1f} ms")
    print(f"  sandboxed    median {on * 1000:8.1f} ms  ({args.backend})")
    verdict = "within" if ratio <= GOAL else "ABOVE"
    print(f"  ratio {ratio:.3f}x ({verdict} the {GOAL}x goal)")


if __name__ == "__main__":
    main()
