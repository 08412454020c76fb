"""A run's fixed cost: one iteration through the real CLI against the same work by hand.

    python benchmarks/bench_fixedcost.py [--runs 7] [--check true] [--against CMD] [--command CMD]

Each pair, interleaved and in fresh processes, on its own fresh copy of a tiny git
repository: ``looprun --until CHECK`` with a scripted model that writes one file, against
the same work by hand (write the file, run CHECK through the shell, ``git diff``). Printed:
the medians of both, their difference and ratio, the phases of the run's ``timing`` (from
``--json``), and, when ``strace`` is installed, the git processes and fsync calls of one
run. The difference is what looprun costs over the work it does. ``--against`` adds
another looprun command line as a third arm (say, an older checkout's, run with
``env PYTHONPATH=OLD/engine python -m looprun``), for before/after figures from one run;
``--command`` replaces the installed ``looprun`` of the first arm, so both arms can start
the same way (``python -m looprun`` tears the interpreter down at exit, the installed
command does not).
CPU time (the run's processes, children included) is printed beside the wall time: on a
shared, loaded machine the wall time stretches with the load, the CPU time much less.

Python's bytecode is cached (in a directory of the benchmark's own, warmed by one run not
counted), as it is for an installed package; ``--no-bytecode`` compiles every module on
every run instead, as ``PYTHONDONTWRITEBYTECODE=1`` does for an editable install.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# the installed command, as a user runs it; else the module
_SCRIPT = Path(sys.executable).parent / "looprun"
LOOPRUN = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "looprun"]
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


BYTECODE: dict[str, str | None] = {}  # the variables that say where bytecode is cached
CPU: list[float] = []  # the CPU time of the last measured run, its processes' all


def children_cpu() -> float:
    """User and system time of this process's ended children (and theirs): a run's CPU
    time, which a loaded machine stretches far less than its wall time."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def looprun_once(
    root: Path,
    template: Path,
    check: str,
    wrap: list[str] | None = None,
    command: list[str] | None = None,
) -> tuple[float, dict]:
    """Wall time of one ``looprun --until`` run and its ``--json`` summary."""
    repo = fresh_copy(template, root / "repo")
    script = root / "script.json"
    script.write_text(json.dumps(SCRIPT), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    # one cache for the whole benchmark, as a user's machine keeps one between runs
    env["LOOPRUN_CACHE_DIR"] = str(root.parent / "cache")
    for name, value in BYTECODE.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    argv = [
        *(wrap or []),
        *(command or LOOPRUN),
        *("--until", check, "--intent", "write a note"),
        *("--workdir", str(repo), "--model", f"script:{script}", "--json"),
    ]
    start, cpu = time.perf_counter(), children_cpu()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"looprun run failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    CPU.append(children_cpu() - cpu)
    return wall, json.loads(proc.stdout)


def by_hand_once(root: Path, template: Path, check: str) -> float:
    """Wall time of the same work by hand: write the file, run the check, ``git diff``."""
    repo = fresh_copy(template, root / "repo")
    start, cpu = time.perf_counter(), children_cpu()
    (repo / "notes.txt").write_text("hi\n", encoding="utf-8")
    subprocess.run(check, shell=True, cwd=repo, check=True, capture_output=True)
    _git(repo, "add", "-N", "notes.txt")
    subprocess.run(["git", "diff"], cwd=repo, check=True, capture_output=True)
    wall = time.perf_counter() - start
    CPU.append(children_cpu() - cpu)
    return wall


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
    ap.add_argument("--no-bytecode", action="store_true", help="compile every module on every run")
    ap.add_argument(
        "--against",
        metavar="CMD",
        help="another looprun command line (e.g. an older checkout's `python -m looprun`), "
        "measured interleaved with the others",
    )
    ap.add_argument(
        "--command",
        metavar="CMD",
        help="the looprun command line of the first arm (default: the installed `looprun`)",
    )
    args = ap.parse_args(argv)
    other = shlex.split(args.against) if args.against else None
    if args.command:
        LOOPRUN[:] = shlex.split(args.command)
    times: dict[str, list[float]] = {"looprun": [], "by hand": [], "against": []}
    cpu: dict[str, list[float]] = {"looprun": [], "by hand": [], "against": []}
    phases: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="looprun-bench-") as tmp:
        template = template_repo(Path(tmp))
        if args.no_bytecode:
            BYTECODE.update(PYTHONDONTWRITEBYTECODE="1", PYTHONPYCACHEPREFIX=None)
        else:
            pycache = str(Path(tmp) / "pycache")
            BYTECODE.update(PYTHONDONTWRITEBYTECODE=None, PYTHONPYCACHEPREFIX=pycache)
            for i, command in enumerate((None, other) if other else (None,)):
                (Path(tmp) / f"warm{i}").mkdir()
                looprun_once(Path(tmp) / f"warm{i}", template, args.check, command=command)
        arms = ["looprun", "by hand", *(["against"] if other else [])]
        for r in range(args.runs):
            # interleaved, rotating which goes first, so load drifts hit every arm alike
            for arm in arms[r % len(arms) :] + arms[: r % len(arms)]:
                root = Path(tmp) / f"{arm.replace(' ', '-')}{r}"
                root.mkdir()
                if arm == "by hand":
                    times[arm].append(by_hand_once(root, template, args.check))
                    cpu[arm].append(CPU[-1])
                    continue
                wall, summary = looprun_once(
                    root, template, args.check, command=other if arm == "against" else None
                )
                times[arm].append(wall)
                cpu[arm].append(CPU[-1])
                if arm == "looprun":
                    for name, value in (summary.get("timing") or {}).get("phases", {}).items():
                        phases.setdefault(name, []).append(value)
        counted = None
        if shutil.which("strace"):
            (Path(tmp) / "s").mkdir()
            counted = syscalls(Path(tmp) / "s", template, args.check)
    ours_s, hand_s = statistics.median(times["looprun"]), statistics.median(times["by hand"])
    cached = "not cached" if args.no_bytecode else "cached"
    print(
        f"one iteration, --until {args.check!r}, fresh tiny repository, bytecode {cached} "
        f"(median of {args.runs})"
    )
    c = {arm: statistics.median(v) for arm, v in cpu.items() if v}
    print(f"  looprun run   {ours_s:.3f} s wall, {c['looprun']:.3f} s CPU")
    print(
        f"  by hand       {hand_s:.3f} s wall, {c['by hand']:.3f} s CPU  "
        "(write the file, run the check, git diff)"
    )
    print(
        f"  difference    +{ours_s - hand_s:.3f} s wall (ratio {ours_s / hand_s:.1f}x), "
        f"+{c['looprun'] - c['by hand']:.3f} s CPU"
    )
    if other:
        other_s = statistics.median(times["against"])
        print(f"  against       {other_s:.3f} s wall, {c['against']:.3f} s CPU  ({args.against})")
        print(
            f"  its difference +{other_s - hand_s:.3f} s wall; looprun saves "
            f"{other_s - ours_s:.3f} s wall, {c['against'] - c['looprun']:.3f} s CPU"
        )
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
