"""What a remote worker does with one job, whatever runs it (Ray today).

1. Refuse a job from another looprun version, one whose model keys are not in this
   worker's own environment (secrets never travel with the job), one naming a model
   server this worker does not know (its keys go only where its own configuration or
   ``LOOPRUN_RAY_ALLOWED_BASE_URLS`` says), and one asking for ``--sandbox required``
   where no OS sandbox works.
2. Claim the lease for the job's execution token; an execution that loses the claim
   (a duplicate of the same attempt, or an attempt the outer loop already replaced) does
   nothing and reports ``superseded``.
3. Fetch the start commit into a fresh repository in a scratch directory (a long-lived
   worker fetches into its clone of the remote and the fresh repository borrows its
   objects: see ``clones``) and check it out; when resuming, restore the sub-loop's run
   directory and checkpoints from the refs its last execution pushed.
4. Run the sub-loop with the usual engine. After every completed step its checkpoints and
   its (redacted) run directory are pushed with the lease moved, all or nothing: a lost
   worker is resumed from there, and a fenced one stops at its next step.
5. Push the final state, report the result as plain data, remove the scratch directory.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from looprun.errors import LooprunError
from looprun.models import anthropic, openai
from looprun.models.config import load_config
from looprun.remote.clones import CloneCache, borrow
from looprun.remote.gitsync import (
    Lease,
    LeaseLost,
    Remote,
    commit_directory,
    extract_commit,
    sync_ref,
)
from looprun.remote.job import JobRefused, RemoteJob, locate_template
from looprun.run.executor import Stopped, SubloopJob, SubloopResult
from looprun.run.subrun import run_subloop
from looprun.sandbox import MODES, SandboxUnavailable, pick
from looprun.system.proc import kill_groups
from looprun.workspace.git import Git

Report = Callable[[str], None]
_POLL_S = 0.25


class Fenced(Stopped):
    """The lease moved to another execution: stop here, nothing more is published."""


def run_remote_job(
    job_json: str,
    report: Report,
    should_stop: Callable[[], bool] = lambda: False,
    scratch_root: str | None = None,
    clones: CloneCache | None = None,
) -> dict[str, Any]:
    """Run one ``RemoteJob`` to its end; returns the result as plain data (see
    ``result_from_dict``), never raising for a sub-loop's own failure. A long-lived
    worker passes its ``clones``: the job's fresh repository then borrows their objects
    instead of fetching the remote's history again."""
    job = RemoteJob.from_json(job_json)
    execution = uuid.uuid4().hex
    base = {"token": job.token, "execution": execution, "host": socket.gethostname()}
    try:
        job.check_version()
        missing = [n for n in job.secret_names if not os.environ.get(n)]
        if missing:
            raise JobRefused(f"this worker's environment has no {', '.join(missing)}")
        check_base_url(job.models.get("base_url"))
        check_sandbox(job.sandbox)
    except JobRefused as exc:
        return base | _plain(job, "error", str(exc), code="job_refused")
    scratch = Path(tempfile.mkdtemp(prefix="looprun-worker-", dir=scratch_root))
    try:
        return base | _run(job, execution, scratch, report, should_stop, clones)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run(
    job: RemoteJob,
    execution: str,
    scratch: Path,
    report: Report,
    should_stop: Callable[[], bool],
    clones: CloneCache | None,
) -> dict[str, Any]:
    tree, run_dir = scratch / "tree", scratch / "run"
    tree.mkdir()
    git = Git(tree)
    git.run("init", "-q")
    remote = Remote(git, job.remote)
    try:
        held = remote.claim(job.run_id, job.token, execution)
    except LeaseLost as exc:
        return _plain(job, "superseded", str(exc))
    report(f"[{job.task_id}] worker {execution[:8]} on {socket.gethostname()} pid {os.getpid()}")
    own = f"refs/looprun/{job.run_id}"
    refs = remote.ls(sync_ref(job.run_id, "start"), f"{own}/*", sync_ref(job.run_id, "journal"))
    if clones is not None:  # a warm worker: fetch into its clone, borrow its objects
        borrow(git, clones.fetch(job.remote, refs), refs)
    elif refs:
        git.run("fetch", "-q", "--no-tags", job.remote, *(f"+{r}:{r}" for r in refs))
    git.run("checkout", "-q", "--detach", job.commit)
    pushed = git.run("rev-parse", "-q", "--verify", sync_ref(job.run_id, "journal"), check=False)
    if job.resume and pushed.strip():
        extract_commit(git, pushed.strip(), run_dir)  # continue after the last pushed step
    # a sub-loop refused before it writes anything (its template) still publishes its end
    run_dir.mkdir(exist_ok=True)
    try:
        template = locate_template(job.template, tree)
    except JobRefused as exc:
        return _plain(job, "error", str(exc), code="job_refused")

    state: dict[str, Any] = {"lease": held, "fenced": False}

    def publish(note: str) -> None:
        journal = commit_directory(git, run_dir, f"looprun journal of {job.run_id}: {note}")
        specs = [f"+{own}/*:{own}/*", f"+{journal}:{sync_ref(job.run_id, 'journal')}"]
        try:
            state["lease"] = remote.publish(job.run_id, state["lease"], specs, note)
        except LeaseLost as exc:
            state["fenced"] = True
            raise Fenced(str(exc)) from exc

    stop = threading.Event()
    done = threading.Event()
    me = threading.get_ident()

    def watch() -> None:  # cooperative stop: next model call, and kill running checks
        while not done.wait(_POLL_S):
            if should_stop():
                stop.set()
                kill_groups({me})
                return

    watcher = threading.Thread(target=watch, name="looprun-stop-watch", daemon=True)
    watcher.start()
    local = SubloopJob(
        task_id=job.task_id,
        attempt=job.attempt,
        template=template,
        inputs=dict(job.inputs),
        workdir=str(tree),
        repository=job.remote,
        commit=job.commit,
        run_id=job.run_id,
        run_dir=str(run_dir),
        model=job.models["act"],
        plan_model=job.models.get("plan", ""),
        cli_models=dict(job.models.get("cli_models") or {}),
        script_key=tuple(tuple(k) for k in job.models.get("script_key") or ()),  # type: ignore[misc]
        base_url=job.models.get("base_url"),
        limits=dict(job.limits),
        resume=job.resume,
        depth=job.depth,
        trace=dict(job.trace),
        sandbox=job.sandbox,
        # the clone is the outer workdir at the start commit: the run's names hold here
        template_files=job.template_files,
        template_root=str(tree),
        stack=job.stack,
    )
    try:
        result = run_subloop(local, stop, report, after_save=lambda: publish("step"))
    finally:
        done.set()
    if state["fenced"]:
        return _usage(_plain(job, "superseded", result.reason), result)
    if result.outcome == "interrupted":
        return _usage(_plain(job, "interrupted", result.reason), result)
    try:
        publish(f"ended {result.outcome}")
    except (Fenced, LooprunError) as exc:
        return _usage(_plain(job, "superseded", str(exc)), result)
    lease: Lease = state["lease"]
    return asdict(result) | {"lease": lease.sha, "run_dir": ""}


ALLOWED_BASE_URLS = "LOOPRUN_RAY_ALLOWED_BASE_URLS"


def allowed_base_urls(env: Mapping[str, str] | None = None) -> set[str]:
    """The model servers this worker sends its keys to: the providers' own, the one its
    environment and config file name, and those listed in ``LOOPRUN_RAY_ALLOWED_BASE_URLS``
    (comma-separated). A driver's job never adds one: on a shared cluster any driver
    could otherwise collect the nodes' keys."""
    env = os.environ if env is None else env
    urls = {openai.DEFAULT_BASE_URL, anthropic.DEFAULT_BASE_URL, env.get("LOOPRUN_BASE_URL", "")}
    try:
        config = load_config(env=env)
    except LooprunError:
        config = None
    if config is not None:
        urls |= {config.base_url or "", config.anthropic_base_url or ""}
    urls |= set(env.get(ALLOWED_BASE_URLS, "").split(","))
    return {_norm(u) for u in urls if u.strip()}


def _norm(url: str) -> str:
    return url.strip().rstrip("/")


def check_base_url(url: str | None, env: Mapping[str, str] | None = None) -> None:
    """Refuse a job whose ``--base-url`` this worker does not hold (see above)."""
    if url and _norm(url) not in allowed_base_urls(env):
        raise JobRefused(
            f"the job names the model server {url}, which this worker does not use: "
            f"list it in {ALLOWED_BASE_URLS} (or LOOPRUN_BASE_URL, or the config file's "
            "base_url) on the worker's node"
        )


def check_sandbox(mode: str | None) -> None:
    """Refuse ``--sandbox required`` where no OS sandbox works (never run it unconfined)."""
    if mode is None:
        return
    if mode not in MODES:
        raise JobRefused(f"the job asks for --sandbox {mode}: expected one of {', '.join(MODES)}")
    if mode == "required":
        try:
            pick(mode, lambda _line: None)
        except SandboxUnavailable as exc:
            raise JobRefused(f"--sandbox required cannot be honoured here: {exc}") from exc


def _plain(job: RemoteJob, outcome: str, reason: str, code: str = "") -> dict[str, Any]:
    return asdict(SubloopResult(job.task_id, job.attempt, "", outcome, reason, code=code))


def _usage(row: dict[str, Any], result: SubloopResult) -> dict[str, Any]:
    """A discarded execution's spending still counts against the outer budget."""
    for k in ("prompt_tokens", "completion_tokens", "cost_usd", "iterations"):
        row[k] = getattr(result, k)
    return row


def result_from_dict(data: dict[str, Any], run_dir: str) -> SubloopResult:
    """The worker's plain result as the outer loop's ``SubloopResult``."""
    fields = {k: data[k] for k in SubloopResult.__dataclass_fields__ if k in data}
    fields["changed"] = tuple(fields.get("changed") or ())
    fields["run_dir"] = run_dir
    return SubloopResult(**fields)
