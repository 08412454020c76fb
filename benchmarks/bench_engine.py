"""Engine overhead per iteration, excluding subprocess time.

    python benchmarks/bench_engine.py [--iterations 100]

Runs a loop of N iterations (an exit condition that never holds) with the scripted model,
the real toolbox (one read_file per turn, no subprocess) and an in-process trivial
observer behind the observer port. The workspace port is an in-memory one, so no git
subprocess runs inside the measured loop; git checkpoint cost is measured on its own.
Each iteration's time is the gap between consecutive progress lines. A baseline in the
same run does the same model and tool calls without the engine; the difference of the
medians is the engine's own overhead per iteration.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from looprun.act.policy import Policy
from looprun.act.tools import Toolbox
from looprun.errors import Location
from looprun.journal import RunJournal
from looprun.loop.engine import RunInfo, run_loop
from looprun.loop.ports import KeepRecent, NullJournal, Ports
from looprun.models.base import Message
from looprun.models.scripted import ScriptedModel
from looprun.observe.base import Observation
from looprun.template.expressions import compile_condition, compile_text
from looprun.template.model import ActSpec, Constraints, Limits, ObserverSpec, Template

HERE = Location("bench", 1, 1)


class MemoryWorkspace:
    """Checkpoints as labels; nothing leaves the process."""

    def __init__(self) -> None:
        self.n = 0

    def base(self) -> str:
        return "base"

    def checkpoint(self, ref: str) -> str:
        self.n += 1
        return f"cp{self.n}"

    def restore(self, ref_or_sha: str) -> None:
        pass

    def diff(self, base: str | None = None) -> str:
        return ""

    def changed_files(self, base: str | None = None) -> list[str]:
        return []


class TrivialObserver:
    def observe(
        self, spec: ObserverSpec, context: Mapping[str, Any], *, deadline: float | None, base: str
    ) -> Observation:
        return Observation(
            "exit_code", ok=False, exit_code=1, signature="same", feedback="still failing"
        )


class NoGuard:
    def check_diff(self, diff_text: str) -> list[Any]:
        return []

    def needs_approval(self, rel_paths: Iterable[str]) -> list[str]:
        return []


def turns(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n):
        out.append({"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]})
        out.append({"text": f"attempt {i}"})
    return out


def template(n: int) -> Template:
    return Template(
        name="bench",
        source="bench",
        act=ActSpec(
            prompt=compile_text("Task {{ task.goal }} #{{ iteration }}", HERE), tools=("read_file",)
        ),
        observe={"check": ObserverSpec("check", "exit_code")},
        exit=(compile_condition("check.ok", HERE),),
        limits=Limits(max_iterations=n, max_repeats=None),  # every iteration repeats
    )


def engine_iterations(workdir: Path, n: int, journal: Any) -> list[float]:
    stamps: list[float] = []
    tpl = template(n)

    def toolbox(c: Constraints, tools: Sequence[str], *, deadline: float | None) -> Toolbox:
        return Toolbox(workdir, c, tools, deadline=deadline)

    ports = Ports(
        model=ScriptedModel(turns(n)),
        toolbox=toolbox,
        workspace=MemoryWorkspace(),
        guard=NoGuard(),
        observer=TrivialObserver(),
        journal=journal,
        context=KeepRecent(0, 3),
        report=lambda line: stamps.append(time.perf_counter()),
    )
    info = RunInfo("bench", str(workdir), str(workdir), str(workdir))
    result = run_loop(tpl, ports, inputs={"intent": "bench"}, run=info)
    assert result.outcome == "exhausted" and result.iterations == n, result
    return [b - a for a, b in itertools.pairwise(stamps)][: n - 1]


def baseline_iterations(workdir: Path, n: int) -> list[float]:
    """The same model and tool calls, no engine."""
    model = ScriptedModel(turns(n))
    box = Toolbox(workdir, Constraints(), ("read_file",))
    specs = box.specs()
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        msgs = [Message("system", "s"), Message("user", f"Task #{i}")]
        reply = model.complete(msgs, specs)
        for call in reply.message.tool_calls:
            res = box.call(call)
            msgs += [reply.message, Message("tool", res.content, tool_call_id=call.id)]
        model.complete(msgs, specs)
        TrivialObserver().observe(ObserverSpec("check", "exit_code"), {}, deadline=None, base="")
        out.append(time.perf_counter() - t0)
    return out


def git_checkpoint_times(workdir: Path, n: int) -> list[float]:
    from looprun.workspace import Workspace

    subprocess.run(["git", "init", "-q"], cwd=workdir, check=True)
    ws = Workspace.open(workdir, state_dir=workdir / ".looprun")
    ws.base()
    out = []
    for i in range(n):
        (workdir / "a.txt").write_text(f"line {i}\n")
        t0 = time.perf_counter()
        ws.checkpoint(f"bench/{i}")
        out.append(time.perf_counter() - t0)
    return out


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:8.3f} ms"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=100)
    n = ap.parse_args(argv).iterations
    with tempfile.TemporaryDirectory(prefix="looprun-bench-") as tmp:
        work = Path(tmp)
        (work / "a.txt").write_text("hello\n")
        _ = Policy(work, Constraints())  # warm imports before timing
        engine_iterations(work, 5, NullJournal())
        base = baseline_iterations(work, n)
        bare = engine_iterations(work, n + 1, NullJournal())
        with RunJournal.create(work) as journal:
            journaled = engine_iterations(work, n + 1, journal)
        git = git_checkpoint_times(work, min(n, 20))
    print(f"iterations measured: {len(bare)} (median per iteration)")
    print(f"baseline (model + tool + observer calls, no engine): {ms(base)}")
    print(f"engine, null journal, in-memory workspace:           {ms(bare)}")
    print(f"engine, real journal (fsync per event):              {ms(journaled)}")
    over = statistics.median(bare) - statistics.median(base)
    over_j = statistics.median(journaled) - statistics.median(base)
    print(f"engine overhead per iteration:                       {over * 1000:8.3f} ms")
    print(f"engine + journal overhead per iteration:             {over_j * 1000:8.3f} ms")
    print(f"git checkpoint (subprocess, not in the figures above): {ms(git)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
