"""Benchmark: a model-proposed command that prints 200 MB.

Runs the command through the ``run`` tool exactly as the engine does and reports the
engine process's peak RSS (the printing child is not counted: RUSAGE_SELF) and whether
the feedback kept the head and the tail. Exits 1 if peak RSS reaches the budget.

    python benchmarks/bench_output.py [--mb 200] [--budget-mb 150]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

from looprun.act.tools import Toolbox
from looprun.models.base import ToolCall
from looprun.template.model import Constraints

FLOOD = """\
import sys
out = sys.stdout.buffer
out.write(b"HEAD-MARKER first line\\n")
chunk = b"z" * 1023 + b"\\n"
for _ in range({chunks}):
    out.write(chunk)
out.write(b"TAIL-MARKER last line\\n")
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200, help="output size in MiB")
    parser.add_argument("--budget-mb", type=float, default=150.0, help="peak RSS budget")
    args = parser.parse_args()
    python = Path(sys.executable).name
    with tempfile.TemporaryDirectory(prefix="looprun-bench-") as tmp:
        work = Path(tmp)
        (work / "flood.py").write_text(FLOOD.format(chunks=args.mb * 1024))
        constraints = Constraints(commands=(f"{python} flood.py",), command_timeout_s=300)
        toolbox = Toolbox(work, constraints, ["run"])
        start = time.monotonic()
        result = toolbox.call(ToolCall("bench", "run", {"command": f"{python} flood.py"}))
        elapsed = time.monotonic() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    figures = {
        "output_mb": args.mb,
        "peak_rss_mb": round(peak_mb, 1),
        "budget_mb": args.budget_mb,
        "duration_s": round(elapsed, 2),
        "feedback_chars": len(result.content),
        "head_kept": "HEAD-MARKER" in result.content,
        "tail_kept": "TAIL-MARKER" in result.content,
        "cut_noted": "bytes of output cut" in result.content,
    }
    print(json.dumps(figures, indent=2))
    ok = peak_mb < args.budget_mb and figures["head_kept"] and figures["tail_kept"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
