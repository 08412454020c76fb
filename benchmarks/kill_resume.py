"""Random kills, then resume: does every killed run end exactly as an uninterrupted one?

    python benchmarks/kill_resume.py [--kills 50] [--workers 2] [--seed 1]
        [--scenarios bugfix,commit,nested]

Scenarios (each on a scratch git copy of a sample, driven by the sample's scripted model,
through the real CLI): ``bugfix`` (samples/invoice, the built-in bugfix template),
``commit`` (the same with ``--commit``) and ``nested`` (samples/feature_shapes, the
built-in feature template: sub-loops in parallel worktrees, a failed attempt, a replan).

Each scenario first runs once uninterrupted (the reference). Each trial then starts the
same run, sends SIGKILL to its process group after a random delay within the reference's
duration, and runs ``looprun resume`` (or the command again, when the kill came before
the run had anything to resume; when it came after the run had written everything but
before the process exited, resume has nothing to do and the run's own summary is the
result). A trial passes when the resumed run ends with the
reference's outcome and iteration count, the same files with the same content (no edit
lost or applied twice), and for ``commit`` exactly one new commit with the reference's
tree and an index that agrees with it. A kill that came after the run had ended is not
counted; that trial is drawn again. Prints one line per trial and the count.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
# what the checks leave behind is not an edit
NOT_EDITS = ("__pycache__", ".pytest_cache", ".ruff_cache", ".coverage")


@dataclass(frozen=True)
class Scenario:
    name: str
    sample: str
    template: str
    extra: tuple[str, ...] = ()


SCENARIOS = {
    "bugfix": Scenario("bugfix", "invoice", "bugfix"),
    "commit": Scenario("commit", "invoice", "bugfix", ("--commit",)),
    "nested": Scenario("nested", "feature_shapes", "feature"),
}


@dataclass(frozen=True)
class Result:
    """What a run left: its outcome and iterations, the files, and for --commit the
    commits made."""

    outcome: str
    iterations: int
    files: str  # a digest of every path and its content, state directory excluded
    commits: int
    head_tree: str
    index_clean: bool

    def differences(self, ref: Result) -> list[str]:
        out = []
        for field in ("outcome", "iterations", "files", "commits", "head_tree", "index_clean"):
            mine, theirs = getattr(self, field), getattr(ref, field)
            if mine != theirs:
                out.append(f"{field}: {mine!r} != {theirs!r}")
        return out


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.pop("LOOPRUN_MODEL", None)
    env.pop("LOOPRUN_CRASH_AT", None)
    return env


def _git(work: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=work, capture_output=True, text=True, check=True
    ).stdout.strip()


def _copy(sample: str, into: Path) -> Path:
    sys.path.insert(0, str(SAMPLES))
    try:
        import demo  # the samples' own scratch-copy helper
    finally:
        sys.path.remove(str(SAMPLES))
    return Path(demo.scratch_copy(sample, into))


def _command(sc: Scenario, work: Path) -> list[str]:
    intent = (SAMPLES / sc.sample / "intent.txt").read_text(encoding="utf-8").strip()
    script = SAMPLES / sc.sample / "script.yaml"
    return [
        *_looprun(),
        sc.template,
        "--intent",
        intent,
        "--workdir",
        str(work),
        "--model",
        f"script:{script}",
        "--json",
        *sc.extra,
    ]


def _looprun() -> list[str]:
    return [sys.executable, "-m", "looprun"]


def _result(work: Path, summary: dict[str, Any]) -> Result:
    listed = _git(work, "ls-files", "-z", "-co", "--exclude-standard")
    digest = hashlib.sha256()
    for path in sorted(p for p in listed.split("\0") if p):
        if any(part in NOT_EDITS for part in Path(path).parts) or not (work / path).is_file():
            continue
        digest.update(path.encode() + b"\0" + (work / path).read_bytes() + b"\0")
    status = _git(work, "status", "--porcelain", "--untracked-files=no")
    return Result(
        outcome=str(summary.get("outcome")),
        iterations=int(summary.get("iterations", -1)),
        files=digest.hexdigest()[:16],
        commits=int(_git(work, "rev-list", "--count", "HEAD")),
        head_tree=_git(work, "rev-parse", "HEAD^{tree}"),
        index_clean=status == "",
    )


def _summary(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    try:
        return dict(json.loads(proc.stdout))
    except ValueError:
        return {"outcome": f"no summary (exit {proc.returncode})", "iterations": -1}


def reference(sc: Scenario, tmp: Path) -> tuple[Result, float]:
    work = _copy(sc.sample, tmp / "reference")
    t0 = time.monotonic()
    proc = subprocess.run(_command(sc, work), env=_env(), capture_output=True, text=True)
    return _result(work, _summary(proc)), time.monotonic() - t0


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=50)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--scenarios", default="bugfix,commit,nested")
    args = ap.parse_args(argv)
    chosen = [SCENARIOS[s] for s in args.scenarios.split(",")]
    rng = random.Random(args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="looprun-kills-"))
    lock = threading.Lock()
    try:
        refs: dict[str, tuple[Result, float]] = {}
        for sc in chosen:
            refs[sc.name] = reference(sc, tmp / f"ref-{sc.name}")
            res, took = refs[sc.name]
            print(f"reference {sc.name}: {res.outcome} after {res.iterations} it in {took:.1f} s")
        plan = [chosen[i % len(chosen)] for i in range(args.kills)]
        passed: dict[str, list[bool]] = {sc.name: [] for sc in chosen}
        durations: list[float] = []
        counter = iter(range(10**6))

        def one(sc: Scenario) -> None:
            ref, took = refs[sc.name]
            while True:
                with lock:
                    n = next(counter)
                    delay = rng.uniform(0.02, took)
                t0 = time.monotonic()
                where = tmp / f"t{n}"
                where.mkdir()
                out = kill_and_resume(sc, delay, where, ref)
                shutil.rmtree(where, ignore_errors=True)
                if out is None:
                    continue
                ok, detail = out
                with lock:
                    passed[sc.name].append(ok)
                    durations.append(time.monotonic() - t0)
                    verdict = "ok  " if ok else "FAIL"
                    print(f"{verdict} {sc.name:<7} kill at {delay:5.1f} s  {'; '.join(detail)}")
                    sys.stdout.flush()
                return

        with ThreadPoolExecutor(max_workers=max(1, args.workers)) as pool:
            list(pool.map(one, plan))
        total = sum(len(v) for v in passed.values())
        good = sum(sum(v) for v in passed.values())
        per = ", ".join(f"{k} {sum(v)}/{len(v)}" for k, v in passed.items())
        print(
            f"kills: {total}; resumed to the uninterrupted result: {good}/{total} ({per}); "
            f"median trial {statistics.median(durations):.1f} s"
        )
        return 0 if good == total else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def kill_and_resume(
    sc: Scenario, delay: float, where: Path, ref: Result
) -> tuple[bool, list[str]] | None:
    """Kill after ``delay``, resume, compare with the reference."""
    work = _copy(sc.sample, where)
    proc = subprocess.Popen(
        _command(sc, work),
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        proc.wait(timeout=delay)
        return None  # it ended first: not a kill
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    root = work / ".looprun" / "runs"
    runs = sorted(root.iterdir()) if root.is_dir() else []
    how = "resume"
    after: subprocess.CompletedProcess[str] | None = None
    if runs:
        after = subprocess.run(
            [*_looprun(), "resume", runs[-1].name, "--workdir", str(work), "--json"],
            env=_env(),
            capture_output=True,
            text=True,
        )
        if after.returncode == 2 and "nothing to resume" in after.stderr:
            summary = runs[-1] / "summary.json"
            if summary.is_file():  # killed after everything was written: that is the result
                how = "nothing to resume (ended before the kill took effect)"
                after = subprocess.CompletedProcess(after.args, 0, summary.read_text(), "")
            else:
                after = None
    if after is None:  # killed before there was anything to resume: start it again
        how = "new run"
        after = subprocess.run(_command(sc, work), env=_env(), capture_output=True, text=True)
    diffs = _result(work, _summary(after)).differences(ref)
    if diffs and after.stderr:
        diffs.append("stderr: " + after.stderr.strip().splitlines()[-1][:200])
    return not diffs, [how, *diffs]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
