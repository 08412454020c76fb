"""looprun's overhead around one agent CLI turn: the same stand-in CLI invoked directly,
and through ``looprun run`` with a one-iteration agent template, each in a fresh process
in a real git repository.

    python benchmarks/bench_agents.py [--runs 9]

The stand-in (tests/support/fake_agent_cli.py, installed on PATH as ``claude``) writes
one file and prints Claude Code's stream-json report, so both sides pay the same CLI
work. Through looprun a turn also pays what a run pays around it: start-up, template
load, the base snapshot and checkpoints in git, the baseline and the observer (the real
diff), the policy, the journal and the summary. Runs are interleaved (a busy machine
slows both alike); the tree is put back between runs, outside the timing. Prints the
median wall time of each, their ratio and the difference: looprun's overhead per turn.
Then one more run, untimed, with a ``git`` wrapper first on PATH that logs each git process
(its subcommand and wall time): how many git processes a turn spends, and on what.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.fake_agent_cli import install  # noqa: E402

TEMPLATE = """\
looprun: 1
name: agent-turn
inputs:
  intent: {type: string, required: true}
plan: {mode: none}
act:
  prompt: "{{ intent }}"
  agent: {cli: claude-code, timeout: 1m}
observe:
  diff: {parser: git_diff}
exit: ["diff.lines > 0"]
refine:
  - else: {retry: "change a file"}
limits: {max_iterations: 1}
"""
MODE = "write:greeting.py=GREETING = 'hello, world'\\n"


def git(work: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=work, check=True, capture_output=True)


def make_repo(where: Path) -> Path:
    work = where / "project"
    work.mkdir()
    (work / "greeting.py").write_text("GREETING = 'hello'\n")
    (work / "README.md").write_text("a project\n")
    git(work, "init", "-q")
    git(work, "add", "-A")
    git(work, "-c", "user.name=bench", "-c", "user.email=bench@example.org", "commit", "-qm", "a")
    return work


def reset(work: Path) -> None:
    """The tree as committed, and no earlier run: every run starts alike."""
    git(work, "checkout", "-q", "--", ".")
    shutil.rmtree(work / ".looprun", ignore_errors=True)
    refs = subprocess.run(
        ["git", "for-each-ref", "--format=%(refname)", "refs/looprun"],
        cwd=work,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for ref in refs:
        git(work, "update-ref", "-d", ref)


def direct(work: Path, env: dict[str, str]) -> float:
    argv = ["claude", "-p", "--output-format", "stream-json", "--", "greet the world"]
    start = time.perf_counter()
    done = subprocess.run(
        argv, cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True
    )
    elapsed = time.perf_counter() - start
    if '"type": "result"' not in done.stdout or "world" not in (work / "greeting.py").read_text():
        sys.exit(f"the CLI did not make its edit:\n{done.stdout}\n{done.stderr}")
    return elapsed


def through_looprun(work: Path, template: Path, env: dict[str, str]) -> float:
    argv = [sys.executable, "-m", "looprun", str(template), "--intent", "greet the world", "--json"]
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if '"outcome": "done"' not in done.stdout:
        sys.exit(f"the looprun run did not end done:\n{done.stdout}\n{done.stderr}")
    return elapsed


def startup(work: Path, env: dict[str, str]) -> float:
    """A looprun process that does nothing but start: the share of the overhead that is
    the interpreter and the imports."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "looprun", "--version"], cwd=work, env=env, check=True,
                   capture_output=True)  # fmt: skip
    return time.perf_counter() - start


GIT_WRAPPER = """#!/bin/sh
start=$(date +%s%N)
"$BENCH_REAL_GIT" "$@"
rc=$?
printf '%s %s\\n' "$(( $(date +%s%N) - start ))" "$*" >> "$BENCH_GIT_LOG"
exit $rc
"""


def _subcommand(args: list[str]) -> str:
    """The git subcommand of a logged command line, past ``-c k=v``, ``-C dir``, options."""
    it = iter(args)
    for arg in it:
        if arg in ("-c", "-C", "--git-dir", "--work-tree", "--namespace"):
            next(it, None)
        elif not arg.startswith("-"):
            return arg
    return "?"


def git_processes(root: Path, work: Path, template: Path, env: dict[str, str]) -> list[str]:
    """One run through looprun with every git process logged by a wrapper on PATH."""
    wrapdir = root / "git-wrapper"
    wrapdir.mkdir()
    wrapper = wrapdir / "git"
    wrapper.write_text(GIT_WRAPPER)
    wrapper.chmod(0o755)
    log = root / "git.log"
    real = shutil.which("git", path=env["PATH"])
    assert real, "git is not on PATH"
    wrapped = {**env, "PATH": os.pathsep.join((str(wrapdir), env["PATH"]))}
    wrapped |= {"BENCH_REAL_GIT": real, "BENCH_GIT_LOG": str(log)}
    through_looprun(work, template, wrapped)
    reset(work)
    rows = [line.split(" ", 1) for line in log.read_text().splitlines()] if log.exists() else []
    spent = sum(int(ns) for ns, _ in rows) / 1e6
    kinds = collections.Counter(_subcommand(cmd.split()) for _, cmd in rows)
    return [
        f"  git processes in one run: {len(rows)}, {spent:.0f} ms wall in them",
        "    " + ", ".join(f"{k} {n}" for k, n in kinds.most_common()),
    ]


def imports(work: Path, env: dict[str, str]) -> float:
    """A process that imports what ``looprun run`` imports before it runs anything: the
    start-up share that is the run's modules, beyond the bare CLI."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import looprun.cli.main, looprun.cli.commands.run"],
                   cwd=work, env=env, check=True, capture_output=True)  # fmt: skip
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9, help="runs of each (default 9)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        work = make_repo(root)
        template = root / "agent-turn.yaml"
        template.write_text(TEMPLATE)
        bindir = root / "bin"
        install(bindir, "claude")
        env = dict(os.environ)
        env["PATH"] = os.pathsep.join((str(bindir), str(Path(sys.executable).parent), env["PATH"]))
        env |= {"FAKE_AGENT_MODE": MODE, "ANTHROPIC_API_KEY": "sk-ant-bench-key"}
        env["XDG_CONFIG_HOME"] = str(root / "config")  # no config file of the user's
        # as an installed looprun starts: its modules' bytecode cached after the first run
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        times: dict[str, list[float]] = {"direct": [], "looprun": [], "startup": [], "imports": []}
        for run in (direct, lambda w, e: through_looprun(w, template, e)):  # warm both
            run(work, env)
            reset(work)
        for n in range(args.runs):
            order = ("direct", "looprun") if n % 2 == 0 else ("looprun", "direct")
            for side in order:
                if side == "direct":
                    times[side].append(direct(work, env))
                else:
                    times[side].append(through_looprun(work, template, env))
                reset(work)
            times["startup"].append(startup(work, env))
            times["imports"].append(imports(work, env))
        gits = git_processes(root, work, template, env)
    cli, lr = statistics.median(times["direct"]), statistics.median(times["looprun"])
    print(f"one agent turn (stand-in CLI, one file edited), fresh processes, {args.runs} runs each")
    print(f"  CLI directly        median {cli * 1000:8.1f} ms")
    print(f"  through looprun run median {lr * 1000:8.1f} ms")
    print(f"  ratio {lr / cli:.2f}x; looprun's overhead per turn {(lr - cli) * 1000:.1f} ms")
    up = statistics.median(times["startup"])
    print(f"  of which a bare `looprun --version` process: median {up * 1000:.1f} ms")
    imp = statistics.median(times["imports"])
    print(f"  a process importing the run command's modules: median {imp * 1000:.1f} ms")
    print("\n".join(gits))


if __name__ == "__main__":
    main()
