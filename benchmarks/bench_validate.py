"""How long `looprun validate` takes over every built-in template.

Prints the median of several runs, measured two ways: a fresh `python -m looprun validate`
process (what pre-commit and CI pay, interpreter start-up included) and in-process (the
validator alone, after imports). Run: python benchmarks/bench_validate.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _templates() -> list[str]:
    files = sorted((REPO / "templates").rglob("*.yaml"))
    return [str(p) for p in files]


def bench_subprocess(runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "looprun", "validate", "--quiet", *_templates()],
            capture_output=True,
            text=True,
            check=False,
        )
        times.append(time.perf_counter() - start)
        if proc.returncode != 0:
            raise SystemExit(f"validate failed:\n{proc.stdout}{proc.stderr}")
    return statistics.median(times)


def _clear_caches() -> None:
    """Parse and compile from scratch each run, as a fresh process would."""
    from looprun.template import compile_cache, yamlpos

    yamlpos._CACHE.clear()
    compile_cache._compile_text_cached.cache_clear()
    compile_cache._compile_condition_cached.cache_clear()


def bench_in_process(runs: int) -> float:
    from looprun.template.commands import validate

    validate(_templates(), quiet=True, echo=lambda *a, **k: None)  # warm imports
    times = []
    for _ in range(runs):
        _clear_caches()
        start = time.perf_counter()
        code = validate(_templates(), quiet=True, echo=lambda *a, **k: None)
        times.append(time.perf_counter() - start)
        if code != 0:
            raise SystemExit("validate failed")
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    n = len(_templates())
    print(f"looprun validate over {n} built-in template files, median of {args.runs} runs")
    print(f"  subprocess (python -m looprun validate): {bench_subprocess(args.runs) * 1000:.0f} ms")
    print(f"  in-process (after imports, cold caches): {bench_in_process(args.runs) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
