"""What holding the repository's control files costs a command, against git itself.

    python benchmarks/bench_control_files.py [--runs 2000]

In a fresh repository (``git init``: git's sample hooks, ``info/exclude``), times the
comparison the workspace makes after every command when nothing changed (the usual
case: one ``lstat`` per file), the one that finds a planted ``core.worktree`` and puts
the config back, and, as the yardstick, one ``git rev-parse HEAD`` (the cheapest git
call the engine makes). Prints the median of each in milliseconds and the ratio of the
usual comparison to the git call.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

from timing import median_ms

from looprun.workspace.control import ControlFiles


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        subprocess.run(["git", "init", "-q", str(work)], check=True)
        subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "x"], cwd=work, check=True)
        config = work / ".git" / "config"
        held = ControlFiles(work / ".git", work / ".git")
        unchanged = median_ms(held.verify, runs)

        def planted() -> None:
            with open(config, "a") as fh:
                fh.write("[core]\n\tworktree = /elsewhere\n")
            assert held.verify() == [str(config)]

        restored = median_ms(planted, max(runs // 10, 1))
        git = ["git", "-C", str(work), "rev-parse", "HEAD"]
        git_ms = median_ms(lambda: subprocess.run(git, capture_output=True), max(runs // 10, 1))
    print(f"comparison, nothing changed: {unchanged:.3f} ms")
    print(f"comparison, config put back: {restored:.3f} ms")
    print(f"one git call (rev-parse):    {git_ms:.3f} ms")
    print(f"ratio (usual comparison / git call): {unchanged / git_ms:.3f}")


if __name__ == "__main__":
    main()
