"""What a one-iteration `bugfix` run costs on each stack, against running that stack's test
command by hand, each in fresh processes in a real git repository (the stack's sample).

    python benchmarks/bench_stacks.py [--runs 5] [--stacks python,go,node,rust,java]

One iteration of `bugfix` runs the stack's checks twice (the baseline, then after the
turn) on the check tree built from the diff, with the run's own build caches; the model is
scripted and writes one file. By hand, the same test command runs in the sample's working
tree (with the user's warm caches); looprun runs in one place, as in a repository a user
runs it in again (after one untimed run each, so both sides start warm). Runs are
interleaved (a busy machine slows both alike), each on a fresh scratch copy made outside
the timing. Prints per stack the medians, the
ratio of the run to one hand run, and the run's overhead over two hand runs (the goal is
at most +0.5 s).
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
sys.path.insert(0, str(ROOT / "samples"))

import demo  # noqa: E402  (the samples' scratch-copy helper)

# stack -> (sample, the test command a user runs by hand, as the stack's pack runs it)
STACKS: dict[str, tuple[str, list[str]]] = {
    "python": ("invoice", [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]),
    "go": ("go_textkit", ["go", "test", "-count=1", "./..."]),
    "node": ("node_durations", ["npm", "test", "--silent"]),
    "rust": ("rust_invoice", ["cargo", "test", "--offline", "-q"]),
    "java": ("java_money", ["mvn", "-o", "-B", "-q", "test"]),
}
SCRIPT = """\
- tool_calls:
    - name: write_file
      arguments: {path: NOTES.md, content: "notes\\n"}
- text: "Wrote a note."
"""


def _env() -> dict[str, str]:
    # As an installed copy runs: compiled modules cached (.pyc), written by the untimed
    # first run. Where the environment forbids writing them, every run would compile
    # looprun from source while the hand-run test tools keep the .pyc files their
    # installation wrote: a cost no installed copy pays.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.pop("LOOPRUN_MODEL", None)
    return env


def _timed(argv: list[str], cwd: Path) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=_env(), capture_output=True, check=False)
    return time.perf_counter() - start, proc.returncode


def _by_hand(sample: str, command: list[str], tmp: Path) -> float:
    repo = demo.scratch_copy(sample, Path(tempfile.mkdtemp(dir=tmp)))
    took, _code = _timed(command, repo)  # the sample's bug fails a test: exit 1 is fine
    return took


def _one_iteration(sample: str, tmp: Path) -> float:
    # a fresh copy at the same path each time: the repository a user runs looprun in again
    # (the build cache a baseline seeded there is the repository's, checks/seeded_cache.py)
    place = tmp / "runs"
    shutil.rmtree(place, ignore_errors=True)
    place.mkdir()
    repo = demo.scratch_copy(sample, place)
    script = repo.parent / "script.yaml"
    script.write_text(SCRIPT)
    argv = [sys.executable, "-m", "looprun", "bugfix", "--intent", "a note"]
    argv += ["--model", f"script:{script}", "--max-iterations", "1", "--json"]
    took, code = _timed(argv, repo)
    if code not in (0, 3):  # one iteration: done or exhausted
        raise SystemExit(f"{sample}: looprun exited {code}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--stacks", default=",".join(STACKS))
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-stacks-") as tmp:
        for stack in args.stacks.split(","):
            sample, command = STACKS[stack]
            _by_hand(sample, command, Path(tmp))  # warm the user's caches once, untimed
            _one_iteration(sample, Path(tmp))  # and the repository's seeded caches
            hand, run = [], []
            for _ in range(args.runs):
                hand.append(_by_hand(sample, command, Path(tmp)))
                run.append(_one_iteration(sample, Path(tmp)))
            h, r = statistics.median(hand), statistics.median(run)
            rows.append((stack, h, r, r / h, r - 2 * h))
            print(f"{stack}: by hand {h:.2f} s, one iteration {r:.2f} s", flush=True)
    print()
    print(f"{'stack':<8}{'by hand':>10}{'1 iteration':>13}{'ratio':>8}{'over 2x hand':>14}")
    for stack, h, r, ratio, over in rows:
        print(f"{stack:<8}{h:>9.2f}s{r:>12.2f}s{ratio:>7.2f}x{over:>+13.2f}s")


if __name__ == "__main__":
    main()
