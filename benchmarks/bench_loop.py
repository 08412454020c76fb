"""The same scripted workload through looprun and through a minimal agent loop.

    python benchmarks/bench_loop.py [--steps 1000] [--runs 3] [--budget 2000]

1. Iterations: ``--steps`` iterations, each one act turn in which the scripted model
   writes one file (``write_file``) and then answers in text; one observer reads a JSON
   status file (no subprocess), whose ``done`` never holds, so the run ends at
   ``--max-iterations``. looprun runs in a fresh process on a real git repository;
   ms per iteration is the median gap between its journal's ``iteration`` events.
2. One act turn of ``--steps`` tool calls (``write_file`` each, ``context.budget_tokens``
   ``--budget``): ms per step over the first and over the last 100 steps (from the
   journal's ``tool_call`` events) and their ratio (flat is 1.0), as the mean of each
   window and as the median of its 10-step stretches (robust to a stretch that waited
   for a busy core).

The baseline is a minimal hand-written agent loop, in a fresh process too: a message
list, the same scripted turns, the same file writes, each request serialised to JSON
as a client would send it, nothing else (no checkpoints, no journal, no checks). Each
figure is the median of ``--runs`` runs, looprun and baseline interleaved.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TEMPLATE = """\
looprun: 1
name: bench
inputs:
  intent: {{type: string, required: true}}
plan: {{mode: none}}
context: {{budget_tokens: {budget}}}
act:
  prompt: "{{{{ intent }}}}"
  tools: [read_file, write_file]
  max_steps: {max_steps}
  constraints:
    paths: {{allow: ["**"]}}
observe:
  status:
    parser: json
    file: status.json
    options: {{facts: {{done: done}}, ok: done}}
exit: [status.ok]
refine:
  - else: {{retry: "not yet"}}
"""

# The baseline loop, run as ``python -c BASELINE SCRIPT WORKDIR MODE``; prints JSON.
BASELINE = r"""
import json, os, sys, time
script, workdir, mode = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
turns = iter(script)
def model(messages):
    json.dumps(messages)  # what a client sends
    return next(turns, {"text": "(script exhausted)"})
def write_file(path, content):
    full = os.path.join(workdir, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as fh:
        fh.write(content)
    return f"created {path} ({len(content)} bytes)"
def turn(messages, stamps):
    while True:
        reply = model(messages)
        calls = reply.get("tool_calls") or []
        messages.append({"role": "assistant", "content": reply.get("text", ""), "calls": calls})
        if not calls:
            return
        for i, call in enumerate(calls):
            out = write_file(**call["arguments"])
            messages.append({"role": "tool", "content": out, "id": i})
            stamps.append(time.perf_counter())
stamps = []
if mode == "iterations":
    while True:
        before = len(stamps)
        turn([{"role": "system", "content": "s"}, {"role": "user", "content": "go"}], stamps)
        if len(stamps) == before:
            break
        json.load(open(os.path.join(workdir, "status.json")))  # the check reads its file
else:
    turn([{"role": "system", "content": "s"}, {"role": "user", "content": "go"}], stamps)
print(json.dumps(stamps))
"""


def note(n: int) -> dict[str, Any]:
    return {"name": "write_file", "arguments": {"path": f"notes/n{n}.txt", "content": f"{n}\n"}}


def script_for(mode: str, steps: int) -> list[dict[str, Any]]:
    if mode == "iterations":
        return [t for n in range(steps) for t in ({"tool_calls": [note(n)]}, {"text": "ok"})]
    return [{"tool_calls": [note(n)]} for n in range(steps)] + [{"text": "done"}]


def fresh_repo(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir(parents=True)
    (repo / "status.json").write_text('{"done": false}\n')
    (repo / "README.md").write_text("bench\n")
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "init"],
    ):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    return repo


def looprun_run(
    root: Path, mode: str, steps: int, budget: int, wrap: list[str] | None = None
) -> tuple[list[dict[str, Any]], float]:
    """Run looprun in a fresh process; its journal events and the wall time."""
    repo = fresh_repo(root)
    template = root / "bench.yaml"
    max_steps = steps if mode == "turn" else 4  # the turn ends at its last tool call
    template.write_text(TEMPLATE.format(budget=budget, max_steps=max_steps))
    script = root / "script.json"
    script.write_text(json.dumps(script_for(mode, steps)))
    iterations = steps if mode == "iterations" else 1
    cmd = [
        *(wrap or []),
        sys.executable,
        *("-m", "looprun", str(template), "--intent", "keep notes"),
        *("--workdir", str(repo), "--model", f"script:{script}"),
        *("--max-iterations", str(iterations), "--json"),
    ]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 3:  # exhausted at max_iterations, as designed
        raise SystemExit(f"looprun failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    [journal] = (repo / ".looprun" / "runs").glob("*/journal.jsonl")
    events = [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]
    return events, wall


def baseline_run(root: Path, mode: str, steps: int) -> tuple[list[float], float]:
    repo = fresh_repo(root)
    script = root / "script.json"
    script.write_text(json.dumps(script_for(mode, steps)))
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", BASELINE, str(script), str(repo), mode],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(proc.stdout), time.perf_counter() - start


def gaps(stamps: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(stamps)]


def window(stamps: list[float], first: bool, size: int = 100) -> float:
    """Mean seconds per step over the first or the last ``size`` steps."""
    part = stamps[: size + 1] if first else stamps[-(size + 1) :]
    return (part[-1] - part[0]) / (len(part) - 1)


def window_median(stamps: list[float], first: bool, size: int = 100, block: int = 10) -> float:
    """Per-step seconds of the median ``block``-step stretch among the first or the last
    ``size`` steps: on a machine shared with other work, a stretch that waited for a busy
    core counts once, not in proportion to how long it waited. (Stretches, not single
    steps: journal timestamps have millisecond resolution.)"""
    part = stamps[: size + 1] if first else stamps[-(size + 1) :]
    return statistics.median(
        (part[i + block] - part[i]) / block for i in range(0, len(part) - block, block)
    )


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f} ms"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--budget", type=int, default=2000, help="context.budget_tokens (turn)")
    args = ap.parse_args(argv)
    per_iter: dict[str, list[float]] = {"looprun": [], "baseline": []}
    walls: dict[str, list[float]] = {"looprun": [], "baseline": []}
    turn: dict[str, list[tuple[float, float]]] = {"looprun": [], "baseline": []}
    turn_median: dict[str, list[tuple[float, float]]] = {"looprun": [], "baseline": []}
    with tempfile.TemporaryDirectory(prefix="looprun-bench-") as tmp:
        for r in range(args.runs):
            events, wall = looprun_run(Path(tmp) / f"li{r}", "iterations", args.steps, 24_000)
            stamps = [e["ts"] for e in events if e["event"] == "iteration"]
            per_iter["looprun"].append(statistics.median(gaps(stamps)))
            walls["looprun"].append(wall / args.steps)
            base, wall = baseline_run(Path(tmp) / f"bi{r}", "iterations", args.steps)
            per_iter["baseline"].append(statistics.median(gaps(base)))
            walls["baseline"].append(wall / args.steps)
            events, _ = looprun_run(Path(tmp) / f"lt{r}", "turn", args.steps, args.budget)
            stamps = [e["ts"] for e in events if e["event"] == "tool_call"]
            turn["looprun"].append((window(stamps, True), window(stamps, False)))
            turn_median["looprun"].append(
                (window_median(stamps, True), window_median(stamps, False))
            )
            base, _ = baseline_run(Path(tmp) / f"bt{r}", "turn", args.steps)
            turn["baseline"].append((window(base, True), window(base, False)))
            turn_median["baseline"].append((window_median(base, True), window_median(base, False)))
    med = {k: statistics.median(v) for k, v in per_iter.items()}
    wall = {k: statistics.median(v) for k, v in walls.items()}
    print(f"{args.steps} iterations, one write_file each (median of {args.runs} runs)")
    for who in ("looprun", "baseline"):
        print(f"  {who:9} per iteration {ms(med[who])}   (wall / iterations {ms(wall[who])})")
    print(f"  ratio looprun / baseline: {med['looprun'] / med['baseline']:.1f}x per iteration")
    print(f"one act turn of {args.steps} tool calls (budget_tokens {args.budget})")
    for how, table in (("mean", turn), ("median", turn_median)):
        for who in ("looprun", "baseline"):
            first = statistics.median(a for a, _ in table[who])
            last = statistics.median(b for _, b in table[who])
            print(
                f"  {who:9} {how:6} step, first 100 {ms(first)}, last 100 {ms(last)}, "
                f"last / first {last / first:.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
