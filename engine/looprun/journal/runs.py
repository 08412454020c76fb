"""The runs of a working tree: their ids, where they are kept, finding one by a prefix
of its id, where each one stands (``RunStatus``) and the rows of ``looprun runs``."""

from __future__ import annotations

import os
import re
import secrets
import time
from pathlib import Path
from typing import Any

from looprun.data.value import valueclass
from looprun.errors import UsageError
from looprun.journal.read import load_json, load_state
from looprun.system import safefs

RUNS_DIR = Path(safefs.STATE_DIR_NAME) / "runs"


# what new_run_id() makes: a run id read from a file (a bundle's manifest) must match it
# before it names a directory or a ref
RUN_ID_FORMAT = re.compile(r"[0-9]{8}-[0-9]{6}-[0-9a-f]{6}")


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


def is_run_id(value: object) -> bool:
    """True for a string shaped like :func:`new_run_id`'s ids and nothing else."""
    return isinstance(value, str) and RUN_ID_FORMAT.fullmatch(value) is not None


def runs_root(workdir: Path) -> Path:
    """Where the runs of ``workdir`` are kept (``looprun runs`` prints it)."""
    return Path(os.path.realpath(workdir)) / RUNS_DIR


def _run_dirs(root: Path) -> list[Path]:
    """The run directories under ``root``; links and files there are no runs."""
    if not safefs.is_real_dir(root.parent) or not safefs.is_real_dir(root):
        return []
    return sorted(p for p in root.iterdir() if safefs.is_real_dir(p))


def find_run(workdir: Path, run_id: str) -> Path:
    root = runs_root(workdir)
    if not run_id or "/" in run_id or run_id.startswith("."):
        raise UsageError(f"not a run id: {run_id!r}")
    path = root / run_id
    if not safefs.is_real_dir(path) or not safefs.is_real_dir(root):
        matches = [p for p in _run_dirs(root) if p.name.startswith(run_id)]
        if len(matches) != 1:
            raise UsageError(f"no run {run_id!r} under {root} (see `looprun runs`)")
        path = matches[0]
    return path


@valueclass
class RunStatus:
    """Where a run stands and what ``looprun resume`` would do with it: the one reading
    of a run's files that both ``looprun runs`` and ``looprun resume`` use.

    The saved state (``state.json``, or the journal's last ``state`` record when that
    is newer) is the source of truth (``summary.json`` only says whether the end
    was fully written down); ``resume`` is empty when nothing is left to do."""

    outcome: str
    reason: str
    iterations: int
    resume: str
    state: dict[str, Any] | None = None
    summary_missing: bool = False
    commit_pending: bool = False


def run_status(run_dir: Path) -> RunStatus:
    """Read a run's files into a :class:`RunStatus`."""
    inv = load_json(run_dir / "run.json")
    state = load_state(run_dir)
    summary = load_json(run_dir / "summary.json")
    if inv is None:
        why = "killed before it was set up (no run.json); nothing to resume: start it again"
        return RunStatus("interrupted", why, int((state or {}).get("iterations", 0)), "")
    if state is None:
        why = "killed before its first step was saved"
        return RunStatus("interrupted", why, 0, "start it again from the beginning", state)
    n = int(state.get("iterations", 0))
    stop = state.get("stop") or {}
    if state.get("pending"):
        paths = ", ".join(state["pending"].get("paths") or [])
        return RunStatus(
            "escalated", f"waiting for approval of {paths}", n, "--approve or --reject", state
        )
    if not stop:
        if (
            summary is not None
            and summary.get("outcome") == "interrupted"
            and (
                summary.get("iterations") == n  # not a later crash
            )
        ):
            why = str(summary.get("reason", ""))
        else:
            why = f"killed after iteration {n}; no outcome recorded"
        return RunStatus("interrupted", why, n, f"continue after iteration {n}", state)
    outcome, why = str(stop.get("outcome", "?")), str(stop.get("reason", ""))
    missing = summary is None or summary.get("outcome") != outcome or summary.get("iterations") != n
    commit = state.get("commit") or {}
    pending = (
        outcome == "done"
        and bool(inv.get("commit"))
        and not (commit.get("sha") or commit.get("skipped"))
    )
    todo = [
        *(["write the missing summary"] if missing else []),
        *(["make the --commit commit"] if pending else []),
        *(["continue after the error"] if outcome == "error" else []),
    ]
    return RunStatus(outcome, why, n, " and ".join(todo), state, missing, pending)


@valueclass
class RunInfoRow:
    """One row of ``looprun runs``: a run, how it ended, and what resume would do."""

    run_id: str
    template: str
    started: str
    outcome: str
    iterations: int
    reason: str
    duration_s: float = 0.0
    tokens: int = 0
    cost_usd: float = 0.0
    resume: str = ""

    @property
    def resumable(self) -> bool:
        return bool(self.resume)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__) | {"resumable": self.resumable}


def list_runs(workdir: Path) -> list[RunInfoRow]:
    """Every run under ``workdir/.looprun/runs``, oldest first, with its outcome so far."""
    rows = []
    for d in _run_dirs(runs_root(workdir)):
        inv = load_json(d / "run.json") or {}
        status = run_status(d)
        summary = load_json(d / "summary.json")
        state = status.state or {}
        usage = (summary or {}).get("usage") or {}
        tokens = int(usage.get("prompt_tokens", state.get("prompt_tokens", 0)) or 0) + int(
            usage.get("completion_tokens", state.get("completion_tokens", 0)) or 0
        )
        rows.append(
            RunInfoRow(
                d.name,
                str(inv.get("template", "?")),
                str(inv.get("started", "")),
                status.outcome,
                status.iterations,
                status.reason,
                round(float((summary or {}).get("duration_s", state.get("elapsed_s", 0)) or 0), 3),
                tokens,
                round(float(usage.get("cost_usd", state.get("cost_usd", 0.0)) or 0.0), 6),
                status.resume,
            )
        )
    return rows
