"""Parallel sub-loops: N independent sub-loops whose scripted model answers after a fixed
delay should take about as long as one sub-loop, not N times as long.

    python benchmarks/bench_subloops.py [--tasks 8] [--delay 0.5] [--runs 3]

Each run is a real outer loop through the CLI (real git worktrees, real merges) with a
per-task script; the baseline is the same outer loop with one task, measured in the
same invocation. Prints the medians and the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from looprun.workspace.git import Git

INNER = """\
looprun: 1
name: touch
inputs:
  intent: {type: string, required: true}
plan: {mode: none}
act:
  prompt: "{{ intent }}"
  tools: [write_file]
observe:
  diff: {parser: git_diff}
exit: ["diff.lines > 0"]
refine:
  - else: {escalate: "no change"}
limits: {max_iterations: 2}
"""


def outer(n: int) -> str:
    tasks = "\n".join(f'    - {{id: t{i}, goal: "write file {i}"}}' for i in range(n))
    return f"""\
looprun: 1
name: fan_out
inputs:
  intent: {{type: string, required: true}}
plan:
  mode: static
  tasks:
{tasks}
each_task:
  uses: ./touch.yaml
  with: {{intent: "{{{{ task.goal }}}}"}}
  isolation: worktree
  parallel: {n}
exit: ["subloops.all_done"]
refine:
  - else: {{escalate: "a sub-loop failed"}}
limits: {{max_iterations: 1}}
"""


def one_run(n: int, delay: float) -> float:
    with tempfile.TemporaryDirectory(prefix="looprun-bench-") as tmp:
        root = Path(tmp)
        (root / "touch.yaml").write_text(INNER)
        (root / "fan_out.yaml").write_text(outer(n))
        script = {
            "tasks": {
                f"t{i}": [
                    {
                        "delay_s": delay,
                        "tool_calls": [
                            {
                                "name": "write_file",
                                "arguments": {"path": f"f{i}.txt", "content": f"{i}\n"},
                            }
                        ],
                    },
                    {"delay_s": delay, "text": "done"},
                ]
                for i in range(n)
            }
        }
        (root / "script.yaml").write_text(yaml.safe_dump(script))
        work = root / "work"
        work.mkdir()
        (work / "README").write_text("bench\n")
        git = Git(work)  # the engine's own git wrapper brings a committer identity
        for args in (("init", "-q"), ("add", "-A"), ("commit", "-qm", "b")):
            git.run(*args)
        t0 = time.perf_counter()
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "looprun",
                str(root / "fan_out.yaml"),
                "--intent",
                "bench",
                "--workdir",
                str(work),
                "--model",
                f"script:{root / 'script.yaml'}",
            ],
            capture_output=True,
            text=True,
        )
        took = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"outer loop failed ({proc.returncode}):\n{proc.stderr}")
        return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--delay", type=float, default=0.5)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    one = statistics.median(one_run(1, args.delay) for _ in range(args.runs))
    many = statistics.median(one_run(args.tasks, args.delay) for _ in range(args.runs))
    print(f"1 sub-loop:  median {one:.2f} s over {args.runs} runs")
    print(
        f"{args.tasks} sub-loops: median {many:.2f} s over {args.runs} runs (parallel {args.tasks})"
    )
    print(f"ratio {many / one:.2f} (serial would be about {args.tasks}x the model time)")


if __name__ == "__main__":
    main()
