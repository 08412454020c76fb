"""Engine cost per iteration on a real git work tree, in fresh processes.

    python benchmarks/bench_engine.py [--iterations 100] [--runs 3]

Each iteration is one act turn in which the scripted model writes one file, then one
observer that reads a JSON file (no subprocess), through the real CLI: a real git
repository, the real journal, the real toolbox. Printed: ms per iteration (median gap
between the journal's ``iteration`` events) against the minimal agent loop of
``bench_loop.py`` measured in the same run, and, when ``strace`` is installed, the git
processes and fsync calls per iteration, counted as the difference between a run of 2N
and a run of N iterations (so start-up and the end of the run do not count).
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_loop import baseline_run, gaps, looprun_run, ms


def syscalls(root: Path, iterations: int) -> tuple[int, int]:
    """(git processes, fsync calls) of one looprun run, counted by strace."""
    log = root / "strace.log"
    wrap = ["strace", "-f", "-qq", "-z", "-e", "trace=execve,fsync,fdatasync", "-o", str(log)]
    looprun_run(root, "iterations", iterations, 24_000, wrap=wrap)
    text = log.read_text(errors="replace")
    git = len(re.findall(r'execve\("[^"]*/git", \[', text))
    fsync = len(re.findall(r"\b(?:fsync|fdatasync)\(", text))
    return git, fsync


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)
    n = args.iterations
    ours: list[float] = []
    base: list[float] = []
    with tempfile.TemporaryDirectory(prefix="looprun-bench-") as tmp:
        for r in range(args.runs):
            events, _ = looprun_run(Path(tmp) / f"l{r}", "iterations", n, 24_000)
            ours.append(
                statistics.median(gaps([e["ts"] for e in events if e["event"] == "iteration"]))
            )
            stamps, _ = baseline_run(Path(tmp) / f"b{r}", "iterations", n)
            base.append(statistics.median(gaps(stamps)))
        counted = None
        if shutil.which("strace"):
            short = syscalls(Path(tmp) / "s1", n)
            long = syscalls(Path(tmp) / "s2", 2 * n)
            counted = ((long[0] - short[0]) / n, (long[1] - short[1]) / n)
    looprun_ms, base_ms = statistics.median(ours), statistics.median(base)
    print(f"{n} iterations, one write_file each, real git work tree (median of {args.runs})")
    print(f"  looprun  per iteration {ms(looprun_ms)}")
    print(f"  baseline per iteration {ms(base_ms)}  (a minimal agent loop, same calls)")
    print(f"  ratio looprun / baseline: {looprun_ms / base_ms:.1f}x")
    if counted is None:
        print("  (strace not installed: git processes and fsyncs per iteration not counted)")
    else:
        print(f"  git processes per iteration: {counted[0]:.2f}; fsync calls: {counted[1]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
