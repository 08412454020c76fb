"""The baseline of a python run on a suite of parametrized tests, against its test command
run once by hand.

    python benchmarks/bench_baseline.py [--runs 5] [--cases 400] [--against CMD]

The repository: a small module and a suite whose parametrized cases are literals (a
module-level tuple) plus a few plain tests, committed. Each round, interleaved and in
fresh processes on a fresh copy: the suite by hand (``python -m pytest``), and
``looprun bugfix`` with a scripted model stopped after one iteration, of which the
baseline phase is read from its journal (``run_started`` to ``baseline``: the checks on
the starting tree, the pytest runs included). ``--against`` adds another looprun command
line as a third arm (an older checkout's, ``env PYTHONPATH=OLD/engine python -m
looprun``), for before/after figures from one run. Printed: the medians and each
baseline's ratio to one hand run (a baseline that runs the suite twice is above 2).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_SCRIPT = Path(sys.executable).parent / "looprun"
LOOPRUN = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "looprun"]
HAND = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
TURNS = [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": "x\n"}}]},
    {"text": "done"},
]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def template_repo(root: Path, cases: int) -> Path:
    repo = root / "template"
    (repo / "tests").mkdir(parents=True)
    (repo / "pyproject.toml").write_text('[project]\nname = "calc"\nversion = "0"\n')
    (repo / "calc.py").write_text("def double(n):\n    return n * 2\n")
    rows = "".join(f"    ({i}, {2 * i}),\n" for i in range(cases))
    (repo / "tests" / "test_calc.py").write_text(
        "import pytest\n\nfrom calc import double\n\nCASES = (\n" + rows + ")\n\n\n"
        '@pytest.mark.parametrize("n,want", CASES)\n'
        "def test_double(n, want):\n    assert double(n) == want\n"
    )
    plain = "".join(
        f"def test_plain_{i}():\n    assert double({i}) == {2 * i}\n\n\n" for i in range(20)
    )
    (repo / "tests" / "test_plain.py").write_text("from calc import double\n\n\n" + plain)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "init")
    return repo


def by_hand(root: Path, template: Path) -> float:
    repo = root / "hand"
    shutil.copytree(template, repo, symlinks=True)
    start = time.perf_counter()
    subprocess.run(HAND, cwd=repo, check=True, capture_output=True)
    wall = time.perf_counter() - start
    shutil.rmtree(repo)
    return wall


def baseline_phase(root: Path, template: Path, command: list[str]) -> float:
    """Seconds from the run's start to its baseline event, read from its journal."""
    repo = root / "run"
    shutil.copytree(template, repo, symlinks=True)
    script = root / "script.json"
    script.write_text(json.dumps(TURNS), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    env["LOOPRUN_CACHE_DIR"] = str(root / "cache")
    # the checks find pytest where this benchmark's python has it, as in an active venv
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    argv = [
        *command,
        *("bugfix", "--intent", "double() is wrong", "--max-iterations", "1"),
        *("--set", "lint=false"),
        *("--workdir", str(repo), "--model", f"script:{script}", "--json"),
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    try:
        run_dir = Path(json.loads(proc.stdout)["run_dir"])
    except (ValueError, KeyError):
        raise SystemExit(
            f"looprun run failed ({proc.returncode}):\n{proc.stderr[-2000:]}"
        ) from None
    events = [json.loads(line) for line in (run_dir / "journal.jsonl").read_text().splitlines()]
    ts = {e["event"]: e["ts"] for e in reversed(events)}
    shutil.rmtree(repo)
    return float(ts["baseline"] - ts["run_started"])


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cases", type=int, default=400, help="parametrized cases in the suite")
    ap.add_argument("--against", help="another looprun command line, as a third arm")
    args = ap.parse_args(argv)
    arms: dict[str, list[str]] = {"looprun": LOOPRUN}
    if args.against:
        arms["against"] = shlex.split(args.against)
    with tempfile.TemporaryDirectory(prefix="lr-bench-baseline-") as tmp:
        root = Path(tmp)
        template = template_repo(root, args.cases)
        hand: list[float] = []
        runs: dict[str, list[float]] = {name: [] for name in arms}
        for command in arms.values():  # one untimed run each: caches warm
            baseline_phase(root, template, command)
        by_hand(root, template)
        for _ in range(args.runs):
            hand.append(by_hand(root, template))
            for name, command in arms.items():
                runs[name].append(baseline_phase(root, template, command))
    one = statistics.median(hand)
    print(f"suite: {args.cases} literal parametrized cases + 20 plain tests; {args.runs} rounds")
    print(f"{'by hand, one pytest run':<28} {one:7.3f} s")
    for name, times in runs.items():
        m = statistics.median(times)
        print(f"{name + ', baseline phase':<28} {m:7.3f} s  {m / one:5.2f}x one hand run")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
