"""Per-sub-loop overhead of the Ray executor against local threads, same workload.

    python benchmarks/bench_ray.py [--tasks 4] [--runs 5] [--against OTHER/.venv/bin/python]

Starts a local Ray cluster on 127.0.0.1 once (its start-up time is printed apart), then
runs the same fan-out outer loop (one-iteration sub-loops, real git worktrees and
merges, a fresh CLI process per run) with 1 and with N sub-loops, with
``--executor local`` and with ``--executor ray:ADDRESS``, interleaved. Prints the medians,
the ratio, the fixed cost per run (joining the cluster) and the marginal cost per
sub-loop (the slope from 1 to N sub-loops), each against local threads.
``--against`` times another checkout's looprun (its environment's interpreter, with
Ray) the same way, on a cluster of its own that it starts, interleaved with this one:
a before and after measured under the same load.
Needs ``pip install 'looprun[ray]'``.

Figures (``--tasks 4``, warm workers, a two-core host under a load of about 8, so
local threads themselves took 1.4-1.9 s): with Ray's exit handler run at the end of
each run, +3.96 s per run and +0.50 s per sub-loop over local threads (3 runs); without
it (a joined cluster, since the run is recorded by then), +2.44 s per run and +0.36 s
per sub-loop (5 runs). Of the rest, per run: importing Ray and joining the cluster
(about 1 s) and creating the run's board actor (about 0.5 s). Joining the cluster and
making the board while the run sets up took the cost per run to +1.96 s, against
+2.81 s for the checkout before it measured with ``--against`` in the same invocation
(5 runs, a load of about 9, local threads 1.3 s); per sub-loop +0.90 s against +1.05 s
there (four sub-loops on two loaded cores). A board shared by every run on the cluster
(reverted: a lost head then held the driver until Ray ended it) with the monitor taking
each sub-loop as it ends and no lease read back after its own push measured +2.34 s per
run against +2.73 s, and +0.42 s per sub-loop against +1.08 s (a load of about 10; the
figures move by half a second between invocations at such loads). On a quiet host (load
about 1, local threads 0.55-0.65 s with one sub-loop), the board again the run's own:
+1.34 s and +1.06 s per run, +0.25 s and +0.32 s per sub-loop (``--tasks 4``, 5 and 7
runs, two invocations).
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


HOLD_CLUSTER = """
import sys, ray
ctx = ray.init(num_cpus=int(sys.argv[1]), include_dashboard=False, log_to_driver=False)
print(ctx.address_info["gcs_address"], flush=True)
sys.stdin.read()  # until the benchmark closes it
ray.shutdown()
"""


def one_run(n: int, executor: str, python: str = sys.executable) -> float:
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
        command = [python, "-m", "looprun", str(root / "fan_out.yaml"), "--intent", "b"]
        command += ["--workdir", str(work), "--model", f"script:{root / 'script.yaml'}"]
        t0 = time.perf_counter()
        env = dict(os.environ, PATH=str(Path(python).parent) + os.pathsep + os.environ["PATH"])
        proc = subprocess.run(
            [*command, "--executor", executor], capture_output=True, text=True, env=env
        )
        took = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"outer loop failed ({proc.returncode}):\n{proc.stderr}")
        return took


def other_cluster(python: str, cpus: int) -> tuple[subprocess.Popen, str]:
    """A local cluster started by another checkout's interpreter (its workers run that
    checkout's looprun), held until its stdin closes; (process, address)."""
    env = dict(os.environ, PATH=str(Path(python).parent) + os.pathsep + os.environ["PATH"])
    proc = subprocess.Popen(
        [python, "-c", HOLD_CLUSTER, str(cpus)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def report(label: str, times: dict[tuple[str, int], list[float]], n: int, runs: int) -> None:
    med = {k: statistics.median(v) for k, v in times.items()}
    for name in ("local", "ray"):
        print(
            f"{label}{name:>5}: 1 sub-loop {med[name, 1]:.2f} s, "
            f"{n} sub-loops {med[name, n]:.2f} s (medians of {runs} runs)"
        )
    slope = {name: (med[name, n] - med[name, 1]) / (n - 1) for name in ("local", "ray")}
    print(f"{label}ratio ray/local with {n} sub-loops: {med['ray', n] / med['local', n]:.2f}")
    print(f"{label}fixed cost per run on ray: {med['ray', 1] - med['local', 1]:+.2f} s vs local")
    print(
        f"{label}marginal cost per sub-loop: local {slope['local']:.2f} s, "
        f"ray {slope['ray']:.2f} s (overhead {slope['ray'] - slope['local']:+.2f} s per sub-loop)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--against", help="another checkout's python, timed the same way")
    args = ap.parse_args()
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"]
    import ray

    t0 = time.perf_counter()
    # as many logical CPUs as sub-loops, so Ray admits them at once as local threads do
    ctx = ray.init(num_cpus=max(2, args.tasks), include_dashboard=False, log_to_driver=False)
    started = time.perf_counter() - t0
    address = ctx.address_info["gcs_address"]
    pythons = {"": (sys.executable, address)}
    other = None
    if args.against:
        other, other_address = other_cluster(args.against, max(2, args.tasks))
        pythons["against: "] = (args.against, other_address)
    times: dict[str, dict[tuple[str, int], list[float]]] = {label: {} for label in pythons}
    try:
        for _ in range(args.runs):  # interleaved: the machine's load hits all alike
            for n in (1, args.tasks):
                for label, (python, at) in pythons.items():
                    for name, spec in (("local", "local"), ("ray", f"ray:{at}")):
                        took = one_run(n, spec, python)
                        times[label].setdefault((name, n), []).append(took)
    finally:
        ray.shutdown()
        if other is not None:
            other.communicate(timeout=60)  # closes its stdin: it shuts its cluster down
    print(f"local Ray cluster start: {started:.1f} s (once per cluster, not per run)")
    for label, measured in times.items():
        report(label, measured, args.tasks, args.runs)


if __name__ == "__main__":
    main()
