"""Per-sub-loop overhead of the Ray executor against local threads, same workload.

    python benchmarks/bench_ray.py [--tasks 4] [--runs 5]

Starts a local Ray cluster on 127.0.0.1 once (its start-up time is printed apart), then
runs the same fan-out outer loop (one-iteration sub-loops, real git worktrees and
merges, a fresh CLI process per run) with 1 and with N sub-loops, with
``--executor local`` and with ``--executor ray:ADDRESS``, interleaved. Prints the medians,
the ratio, the fixed cost per run (joining the cluster) and the marginal cost per
sub-loop (the slope from 1 to N sub-loops), each against local threads.
Needs ``pip install 'looprun[ray]'``.

Figures (``--tasks 4``, warm workers, a two-core host under a load of about 8, so
local threads themselves took 1.4-1.9 s): with Ray's exit handler run at the end of
each run, +3.96 s per run and +0.50 s per sub-loop over local threads (3 runs); without
it (a joined cluster, since the run is recorded by then), +2.44 s per run and +0.36 s
per sub-loop (5 runs). Of the rest, per run: importing Ray and joining the cluster
(about 1 s) and creating the run's board actor (about 0.5 s).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from bench_subloops import INNER, outer

from looprun.workspace.git import Git

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # loopback only
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a loopback cluster of this process


def one_run(n: int, executor: str) -> float:
    with tempfile.TemporaryDirectory(prefix="looprun-bench-") as tmp:
        root = Path(tmp)
        (root / "touch.yaml").write_text(INNER)
        (root / "fan_out.yaml").write_text(outer(n))
        write = {"name": "write_file", "arguments": {"path": "f.txt", "content": "x\n"}}
        script = {"tasks": {f"t{i}": [{"tool_calls": [write]}, {"text": "done"}] for i in range(n)}}
        (root / "script.yaml").write_text(yaml.safe_dump(script))
        work = root / "work"
        work.mkdir()
        (work / "README").write_text("bench\n")
        git = Git(work)
        for args in (("init", "-q"), ("add", "-A"), ("commit", "-qm", "b")):
            git.run(*args)
        command = [sys.executable, "-m", "looprun", str(root / "fan_out.yaml"), "--intent", "b"]
        command += ["--workdir", str(work), "--model", f"script:{root / 'script.yaml'}"]
        t0 = time.perf_counter()
        proc = subprocess.run([*command, "--executor", executor], capture_output=True, text=True)
        took = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"outer loop failed ({proc.returncode}):\n{proc.stderr}")
        return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"]
    import ray

    t0 = time.perf_counter()
    # as many logical CPUs as sub-loops, so Ray admits them at once as local threads do
    ctx = ray.init(num_cpus=max(2, args.tasks), include_dashboard=False, log_to_driver=False)
    started = time.perf_counter() - t0
    address = ctx.address_info["gcs_address"]
    executors = {"local": "local", "ray": f"ray:{address}"}
    times: dict[tuple[str, int], list[float]] = {}
    try:
        for _ in range(args.runs):  # interleaved: the machine's load hits all alike
            for n in (1, args.tasks):
                for name, spec in executors.items():
                    times.setdefault((name, n), []).append(one_run(n, spec))
    finally:
        ray.shutdown()
    med = {k: statistics.median(v) for k, v in times.items()}
    n = args.tasks
    print(f"local Ray cluster start: {started:.1f} s (once per cluster, not per run)")
    for name in executors:
        print(
            f"{name:>5}: 1 sub-loop {med[name, 1]:.2f} s, {n} sub-loops {med[name, n]:.2f} s "
            f"(medians of {args.runs} runs)"
        )
    slope = {name: (med[name, n] - med[name, 1]) / (n - 1) for name in executors}
    print(f"ratio ray/local with {n} sub-loops: {med['ray', n] / med['local', n]:.2f}")
    print(f"fixed cost per run on ray: {med['ray', 1] - med['local', 1]:+.2f} s vs local")
    print(
        f"marginal cost per sub-loop: local {slope['local']:.2f} s, ray {slope['ray']:.2f} s "
        f"(overhead {slope['ray'] - slope['local']:+.2f} s per sub-loop)"
    )


if __name__ == "__main__":
    main()
