"""A run's fixed cost: one iteration through the real CLI against the same work by hand.

    python benchmarks/bench_fixedcost.py [--runs 7] [--check true]

Each pair, interleaved and in fresh processes, on its own fresh copy of a tiny git
repository: ``looprun --until CHECK`` with a scripted model that writes one file, against
the same work by hand (write the file, run CHECK through the shell, ``git diff``). Printed:
the medians of both, their difference and ratio, the phases of the run's ``timing`` (from
``--json``), and, when ``strace`` is installed, the git processes and fsync calls of one
run. The difference is what looprun costs over the work it does.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LOOPRUN = [sys.executable, "-m", "looprun"]
SCRIPT = [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": "hi\n"}}]},
    {"text": "done"},
]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def template_repo(root: Path) -> Path:
    """A tiny committed repository, copied fresh for every measured run."""
    repo = root / "template"
    repo.mkdir(parents=True)
    (repo / "app.py").write_text("def add(a, b):\n    return a + b\n", encoding="utf-8")
    (repo / "README.md").write_text("# tiny\n", encoding="utf-8")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "init")
    return repo


def fresh_copy(template: Path, dest: Path) -> Path:
    shutil.copytree(template, dest, symlinks=True)
    return dest


def looprun_once(
    root: Path, template: Path, check: str, wrap: list[str] | None = None
) -> tuple[float, dict]:
    """Wall time of one ``looprun --until`` run and its ``--json`` summary."""
    repo = fresh_copy(template, root / "repo")
    script = root / "script.json"
    script.write_text(json.dumps(SCRIPT), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    # one cache for the whole benchmark, as a user's machine keeps one between runs
    env["LOOPRUN_CACHE_DIR"] = str(root.parent / "cache")
    argv = [
        *(wrap or []),
        *LOOPRUN,
        *("--until", check, "--intent", "write a note"),
        *("--workdir", str(repo), "--model", f"script:{script}", "--json"),
    ]
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"looprun run failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return wall, json.loads(proc.stdout)


def by_hand_once(root: Path, template: Path, check: str) -> float:
    """Wall time of the same work by hand: write the file, run the check, ``git diff``."""
    repo = fresh_copy(template, root / "repo")
    start = time.perf_counter()
    (repo / "notes.txt").write_text("hi\n", encoding="utf-8")
    subprocess.run(check, shell=True, cwd=repo, check=True, capture_output=True)
    _git(repo, "add", "-N", "notes.txt")
    subprocess.run(["git", "diff"], cwd=repo, check=True, capture_output=True)
    return time.perf_counter() - start


def syscalls(root: Path, template: Path, check: str) -> tuple[int, int]:
    """(git processes, fsync calls) of one looprun run, counted by strace."""
    log = root / "strace.log"
    wrap = ["strace", "-f", "-qq", "-z", "-e", "trace=execve,fsync,fdatasync", "-o", str(log)]
    looprun_once(root, template, check, wrap=wrap)
    text = log.read_text(errors="replace")
    git = len(re.findall(r'execve\("[^"]*/git", \[', text))
    fsync = len(re.findall(r"\b(?:fsync|fdatasync)\(", text))
    return git, fsync


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--check", default="true", help="the check command (shell)")
    args = ap.parse_args(argv)
    ours: list[float] = []
    hand: list[float] = []
    phases: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="looprun-bench-") as tmp:
        template = template_repo(Path(tmp))
        for r in range(args.runs):
            # interleaved, alternating which goes first, so load drifts hit both alike
            first_ours = r % 2 == 0
            for ours_turn in (first_ours, not first_ours):
                root = Path(tmp) / f"{'l' if ours_turn else 'h'}{r}"
                root.mkdir()
                if ours_turn:
                    wall, summary = looprun_once(root, template, args.check)
                    ours.append(wall)
                    for name, value in (summary.get("timing") or {}).get("phases", {}).items():
                        phases.setdefault(name, []).append(value)
                else:
                    hand.append(by_hand_once(root, template, args.check))
        counted = None
        if shutil.which("strace"):
            (Path(tmp) / "s").mkdir()
            counted = syscalls(Path(tmp) / "s", template, args.check)
    ours_s, hand_s = statistics.median(ours), statistics.median(hand)
    print(f"one iteration, --until {args.check!r}, fresh tiny repository (median of {args.runs})")
    print(f"  looprun run   {ours_s:.3f} s")
    print(f"  by hand       {hand_s:.3f} s  (write the file, run the check, git diff)")
    print(f"  difference    +{ours_s - hand_s:.3f} s   ratio {ours_s / hand_s:.1f}x")
    if phases:
        shown = ", ".join(f"{k} {statistics.median(v):.3f}" for k, v in phases.items())
        print(f"  timing (median s): {shown}")
    if counted is None:
        print("  (strace not installed: git processes and fsyncs not counted)")
    else:
        print(f"  per run: {counted[0]} git processes, {counted[1]} fsync calls")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
