"""ms per iteration, looprun against mini-swe-agent 2.4.6 on the same scripted workload.

    python benchmarks/bench_peer.py --peer-python PEER/bin/python [--steps 1000] [--runs 3]

The peer is not a dependency of looprun; install it in a virtual environment of its own:

    python3 -m venv PEER && PEER/bin/pip install mini-swe-agent==2.4.6

Both sides run ``--steps`` steps on a fresh git repository (``README.md`` and
``status.json``, one commit), each in a fresh process, interleaved run by run; each
step writes ``notes/n<N>.txt`` holding ``<N>`` and a newline.

- looprun: ``python -m looprun`` on a template whose act turn may use ``write_file``;
  its scripted model (``--model script:``) answers each turn with one ``write_file``
  call, then with text, which ends the turn. Then the observer reads ``status.json``
  (no subprocess), whose ``done`` never holds, refine retries, and the iteration is
  checkpointed; the run ends at ``--max-iterations``. One step is one iteration: a
  model call with one tool call (written through the file tool, snapshotted, diffed
  and checkpointed in git, journaled), a closing model call, one observation.
- mini-swe-agent: its ``DefaultAgent`` with the configuration it ships as ``mini.yaml``
  (system and instance templates, observation template, environment variables), its
  ``DeterministicToolcallModel`` answering each query with one ``bash`` tool call
  ``mkdir -p notes && printf '%s\\n' N > notes/nN.txt``, and its ``LocalEnvironment``
  in the repository, which runs it in a fresh shell. The run ends at its step limit.
  The trajectory is written once, after the run (the bare agent loop, the faster
  peer); with ``--peer-saves-trajectory`` it is saved after each step as its ``mini``
  command does by default, which costs the peer time growing with the run.

Printed, per side: ms per step as the median gap between consecutive steps (looprun's
journal ``iteration`` events; the timestamps the peer puts on each tool result) and as
the mean over the run (last minus first step over steps - 1), then the ratios looprun /
peer. Each figure is the median over ``--runs``. The files each side wrote are checked.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_loop import fresh_repo, gaps, looprun_run, ms

# Run by the peer's interpreter as ``PEER_DRIVER STEPS WORKDIR TRAJECTORY``.
PEER_DRIVER = r"""
import sys
from pathlib import Path
from minisweagent.agents.default import DefaultAgent
from minisweagent.config import get_config_from_spec
from minisweagent.environments.local import LocalEnvironment
from minisweagent.models.test_models import DeterministicToolcallModel, make_toolcall_output

steps, workdir, trajectory = int(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
saves = sys.argv[4] == "saves"
config = get_config_from_spec("mini.yaml")
outputs = []
for n in range(steps):
    command = f"mkdir -p notes && printf '%s\\n' {n} > notes/n{n}.txt"
    call_id = f"call_{n}"
    call = {"id": call_id, "type": "function",
            "function": {"name": "bash", "arguments": '{"command": %r}' % command}}
    action = {"command": command, "tool_call_id": call_id}
    outputs.append(make_toolcall_output(None, [call], [action]))
model = DeterministicToolcallModel(
    outputs=outputs, observation_template=config["model"]["observation_template"]
)
env = LocalEnvironment(cwd=workdir, **config.get("environment", {}))
agent_config = {k: v for k, v in config["agent"].items() if k != "mode"}  # mode: interactive only
agent_config.update(step_limit=steps, cost_limit=0, output_path=trajectory if saves else None)
agent = DefaultAgent(model, env, **agent_config)
result = agent.run("keep notes")
assert result.get("exit_status") == "LimitsExceeded", result
if not saves:
    agent.save(trajectory)  # after the run, for the timestamps only
"""

SETUP = (
    "python3 -m venv PEER && PEER/bin/pip install mini-swe-agent==2.4.6\n"
    "then: python benchmarks/bench_peer.py --peer-python PEER/bin/python"
)


def peer_run(root: Path, python: str, steps: int, saves: bool) -> list[float]:
    """Run mini-swe-agent in a fresh process; the timestamps of its tool results."""
    repo = fresh_repo(root)
    trajectory = root / "trajectory.json"
    mode = "saves" if saves else "once"
    env = {
        **os.environ,
        "MSWEA_SILENT_STARTUP": "1",
        "MSWEA_GLOBAL_CONFIG_DIR": str(root / "peer-config"),
    }
    proc = subprocess.run(
        [python, "-c", PEER_DRIVER, str(steps), str(repo), str(trajectory), mode],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"mini-swe-agent failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    check_notes(repo, steps, "mini-swe-agent")
    messages = json.loads(trajectory.read_text())["messages"]
    stamps = [m["extra"]["timestamp"] for m in messages if m.get("role") == "tool"]
    if len(stamps) != steps:
        raise SystemExit(f"mini-swe-agent ran {len(stamps)} steps, not {steps}")
    return stamps


def check_notes(repo: Path, steps: int, who: str) -> None:
    """Each step's file is there with its content: both sides did the same work."""
    for n in range(steps):
        text = (repo / "notes" / f"n{n}.txt").read_text()
        if text != f"{n}\n":
            raise SystemExit(f"{who}: notes/n{n}.txt holds {text!r}")


def looprun_stamps(root: Path, steps: int) -> list[float]:
    events, _ = looprun_run(root, "iterations", steps, 24_000)
    check_notes(root / "repo", steps, "looprun")
    stamps = [e["ts"] for e in events if e["event"] == "iteration"]
    if len(stamps) != steps:
        raise SystemExit(f"looprun ran {len(stamps)} iterations, not {steps}")
    return stamps


def mean_step(stamps: list[float]) -> float:
    return (stamps[-1] - stamps[0]) / (len(stamps) - 1)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peer-python", help="the python of a venv with mini-swe-agent 2.4.6")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--peer-saves-trajectory",
        action="store_true",
        help="the peer saves its trajectory after each step (its `mini` command's default)",
    )
    args = ap.parse_args(argv)
    if not args.peer_python:
        print(f"--peer-python is required. Set the peer up once:\n{SETUP}", file=sys.stderr)
        return 2
    version = subprocess.run(
        [args.peer_python, "-c", "import minisweagent; print(minisweagent.__version__)"],
        capture_output=True,
        text=True,
        env={**os.environ, "MSWEA_SILENT_STARTUP": "1"},
        check=False,
    )
    if version.returncode != 0:
        print(f"{args.peer_python}: no minisweagent there; set it up:\n{SETUP}", file=sys.stderr)
        return 2
    saves = args.peer_saves_trajectory
    median: dict[str, list[float]] = {"looprun": [], "peer": []}
    mean: dict[str, list[float]] = {"looprun": [], "peer": []}
    with tempfile.TemporaryDirectory(prefix="looprun-bench-") as tmp:
        for r in range(args.runs):
            for who in ("looprun", "peer") if r % 2 == 0 else ("peer", "looprun"):
                root = Path(tmp) / f"{who}{r}"
                if who == "looprun":
                    stamps = looprun_stamps(root, args.steps)
                else:
                    stamps = peer_run(root, args.peer_python, args.steps, saves)
                median[who].append(statistics.median(gaps(stamps)))
                mean[who].append(mean_step(stamps))
    med = {k: statistics.median(v) for k, v in median.items()}
    avg = {k: statistics.median(v) for k, v in mean.items()}
    print(
        f"{args.steps} steps, one file written per step, fresh processes, "
        f"median of {args.runs} interleaved runs"
    )
    peer_name = f"mini-swe-agent {version.stdout.strip()}"
    print(
        "  (the peer saves its trajectory after each step)"
        if saves
        else "  (the peer writes its trajectory once, after the run)"
    )
    for who, label in (("looprun", "looprun"), ("peer", peer_name)):
        print(f"  {label:20} per step: median {ms(med[who])}   mean {ms(avg[who])}")
        print(f"  {'':20} runs (median gap): {', '.join(ms(v).strip() for v in median[who])}")
    print(
        f"  ratio looprun / peer: median {med['looprun'] / med['peer']:.2f}x, "
        f"mean {avg['looprun'] / avg['peer']:.2f}x   (goal <= 0.5x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
