"""How long `looprun validate templates/*.yaml` takes, against baselines from the same run.

Fresh processes, interleaved, medians of ``--runs``:

* baselines: a bare interpreter (``python -c pass``), the interpreter importing click
  (the CLI's floor), and importing the four libraries a full validation uses
  (click, yaml, jsonschema, jinja2);
* ``looprun validate --no-cache``: every file checked in full;
* a cold cache (an empty cache directory each run: check in full and remember);
* a warm cache (every file known valid and unchanged: what a pre-commit hook or CI
  re-run over unchanged templates pays).

Then in-process: the validator alone after imports, caches cleared (no disk cache).
Run: python benchmarks/bench_validate.py [--runs N]
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

REPO = Path(__file__).resolve().parents[1]


def _templates() -> list[str]:
    return [str(p) for p in sorted((REPO / "templates").glob("*.yaml"))]


# As an installed copy runs: compiled modules cached (.pyc). Where the environment forbids
# writing them, every fresh process would compile looprun from source (its libraries
# keep the .pyc files their installation wrote), which is not what a user pays.
_ENV = {
    k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "LOOPRUN_CACHE_DIR")
}


def _fresh(argv: list[str], cache: str) -> float:
    env = {**_ENV, "XDG_CACHE_HOME": cache}
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{argv[:5]} failed:\n{proc.stdout}{proc.stderr}")
    return took


def bench_fresh(runs: int) -> dict[str, float]:
    validate = [sys.executable, "-m", "looprun", "validate", "--quiet", *_templates()]
    with tempfile.TemporaryDirectory() as tmp:
        warm = str(Path(tmp) / "warm")
        _fresh(validate, warm)  # fill the warm cache once
        cases = {
            "python -c pass": lambda _i: _fresh([sys.executable, "-c", "pass"], warm),
            "python -c 'import click'": lambda _i: _fresh(
                [sys.executable, "-c", "import click"], warm
            ),
            "python -c 'import click, yaml, jsonschema, jinja2'": lambda _i: _fresh(
                [sys.executable, "-c", "import click, yaml, jsonschema, jinja2"], warm
            ),
            "looprun validate --no-cache": lambda _i: _fresh([*validate, "--no-cache"], warm),
            "looprun validate, cold cache": lambda i: _fresh(validate, str(Path(tmp) / f"c{i}")),
            "looprun validate, warm cache": lambda _i: _fresh(validate, warm),
        }
        times: dict[str, list[float]] = {name: [] for name in cases}
        for i in range(runs):  # interleaved: load on the machine hits every case alike
            for name, run in cases.items():
                times[name].append(run(i))
    return {name: statistics.median(t) for name, t in times.items()}


def _clear_caches() -> None:
    """Parse and compile from scratch each run, as a fresh process would."""
    from looprun.template import compile_cache, yamlpos

    yamlpos._CACHE.clear()
    compile_cache._compile_text_cached.cache_clear()
    compile_cache._compile_condition_cached.cache_clear()


def bench_in_process(runs: int) -> float:
    from looprun.cli.validation.validate import validate

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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    n = len(_templates())
    print(f"looprun validate templates/*.yaml ({n} files), fresh processes, median of {args.runs}")
    medians = bench_fresh(args.runs)
    bare = medians["python -c pass"]
    imports = medians["python -c 'import click, yaml, jsonschema, jinja2'"]
    for name, seconds in medians.items():
        print(
            f"  {name:<52} {seconds * 1000:7.0f} ms  "
            f"{seconds / bare:5.1f}x bare  {seconds / imports:5.2f}x the imports"
        )
    print(f"in-process, after imports, cold caches: {bench_in_process(args.runs) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
