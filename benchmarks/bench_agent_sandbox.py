"""One agent CLI turn in the run's sandbox against one outside it, in the same run.

    python benchmarks/bench_agent_sandbox.py [--runs 9] [--cli claude|stand-in]

The turn is the actor's, as a run takes it: the real Claude Code (``--cli claude``, the
default; it must be on PATH) or the stand-in CLI (tests/support/fake_agent_cli.py) writes
one file, talking to a loopback server that plays the model's reply (Anthropic Messages,
streamed). Confined, the CLI runs in the sandbox ``sandbox: required`` picks here
(bubblewrap: its own namespaces, no network, the server reached through the engine's
bridge); unconfined, it runs as a run with ``sandbox: off`` starts it. Turns are
interleaved (a busy machine slows both alike). Prints the median wall time of each and
their ratio; the goal is a ratio of at most 1.3.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.agent_server import AgentScript, call, say  # noqa: E402
from tests.support.fake_agent_cli import install  # noqa: E402
from tests.support.fake_provider import FakeProvider  # noqa: E402

from looprun.act.agents.actor import AgentActor  # noqa: E402
from looprun.loop.ports import AgentRequest  # noqa: E402
from looprun.sandbox import Confinement, sandbox_for  # noqa: E402
from looprun.template.model import AgentSpec, Constraints  # noqa: E402

GOAL = 1.3
KEY = "sk-ant-bench-sandbox-key"


def turn(actor: AgentActor, target: Path) -> float:
    target.unlink(missing_ok=True)
    request = AgentRequest("greet the world", "", iteration=1, task_id="t", timeout_s=120)
    start = time.perf_counter()
    report = actor.act(request)
    elapsed = time.perf_counter() - start
    if report.error or not target.exists():
        sys.exit(f"the turn did not make its edit: {report.error} {report.error_detail}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9, help="turns of each (default 9)")
    ap.add_argument("--cli", choices=("claude", "stand-in"), default="claude")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        work = root / "work"
        work.mkdir()
        target = work / "greeting.py"
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
        if args.cli == "stand-in":
            install(root / "bin", "claude")
            env["PATH"] = os.pathsep.join((str(root / "bin"), env["PATH"]))
            env["FAKE_AGENT_MODE"] = "write:greeting.py=GREETING = 'hello, world'\\n"
        elif shutil.which("claude") is None:
            sys.exit("`claude` is not on PATH (npm install -g @anthropic-ai/claude-code)")
        write = call("Write", {"file_path": str(target), "content": "GREETING = 'hi'\n"})
        script = AgentScript([write, say("Done.")] * (2 * args.runs + 2))
        confinement = Confinement(writable=(work, root / "run"), read_only=())
        sandbox = sandbox_for("required", confinement, print)
        with FakeProvider(script) as server:
            env |= {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": KEY}
            actors = {
                side: AgentActor(
                    AgentSpec(cli="claude-code"),
                    Constraints(),
                    workdir=work,
                    run_dir=root / "run" / side,
                    artifacts=root / "run" / side / "artifacts",
                    env=env,
                    sandbox=box,
                )
                for side, box in (("sandboxed", sandbox), ("unconfined", None))
            }
            for actor in actors.values():  # warm both
                turn(actor, target)
            times: dict[str, list[float]] = {side: [] for side in actors}
            for n in range(args.runs):
                order = list(actors) if n % 2 == 0 else list(reversed(actors))
                for side in order:
                    times[side].append(turn(actors[side], target))
    inside = statistics.median(times["sandboxed"])
    outside = statistics.median(times["unconfined"])
    backend = sandbox.name if sandbox is not None else "none"
    print(f"one agent CLI turn ({args.cli}, one file written), {args.runs} turns each")
    print(f"  in the sandbox ({backend})  median {inside * 1000:8.1f} ms")
    print(f"  unconfined           median {outside * 1000:8.1f} ms")
    ratio = inside / outside
    print(f"  ratio {ratio:.2f}x (goal <= {GOAL}x): {'ok' if ratio <= GOAL else 'OVER'}")


if __name__ == "__main__":
    main()
