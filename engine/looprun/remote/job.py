"""The job that crosses the wire to a remote worker: small JSON, never repository content
and never a secret.

A ``RemoteJob`` names the template (a built-in name, a path inside the repository at the
start commit, or a shared path with its digest), the inputs, the budget share, the model
references, the *names* of the environment variables the worker must have for them, the
git remote and the start commit, the sandbox mode the command line asked for, and the
execution token that fences this attempt.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, field
from pathlib import Path
from typing import Any

from looprun import __version__
from looprun.data.value import valueclass
from looprun.errors import LooprunError
from looprun.run.executor import SubloopJob
from looprun.system.resources import templates_dir

# The variable each hosted provider reads its key from (the worker's own environment).
_KEY_VARIABLES = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


class JobRefused(LooprunError):
    """A worker will not run this job (another looprun version, a changed template)."""


@valueclass
class RemoteJob:
    """Everything a worker needs besides the repository, which it fetches with git."""

    version: str
    token: str
    remote: str  # a git URL both the outer loop and the worker reach
    commit: str  # the start commit, on the remote at refs/looprun-sync/<run_id>/start
    run_id: str
    task_id: str
    attempt: int
    template: Mapping[str, str]  # {"builtin": name} | {"repo_path", "digest"} | {"path", "digest"}
    inputs: Mapping[str, Any]
    limits: Mapping[str, Any]
    models: Mapping[str, Any]  # act, plan, cli_models, base_url, script_key
    secret_names: tuple[str, ...] = ()
    resume: bool = False
    depth: int = 1
    sandbox: str | None = None  # --sandbox: a worker that cannot honour ``required`` refuses
    extra: Mapping[str, Any] = field(default_factory=dict)
    # the trace the sub-loop's spans join: endpoint, W3C traceparent, content opt-in
    trace: Mapping[str, Any] = field(default_factory=dict)
    # the files the run's template was composed from, relative to the repository root (a
    # worker holds the sub-template's files in its clone to them); None: not recorded
    template_files: Mapping[str, str] | None = None
    stack: str | None = None  # the run's stack: the sub-template composes its pack

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def for_subloop(cls, job: SubloopJob, url: str) -> RemoteJob:
        """The job for one sub-loop attempt, pushed through ``url``; its execution token
        is set at each launch."""
        models = {
            "act": job.model,
            "plan": job.plan_model,
            "cli_models": dict(job.cli_models),
            "base_url": job.base_url,
            "script_key": [list(k) for k in job.script_key],
        }
        return cls(
            version=__version__,
            token="",
            remote=url,
            commit=job.commit,
            run_id=job.run_id,
            task_id=job.task_id,
            attempt=job.attempt,
            template=describe_template(job.template, job.repository),
            inputs=dict(job.inputs),
            limits=dict(job.limits),
            models=models,
            secret_names=secret_names(job.model, job.plan_model),
            resume=job.resume,
            depth=job.depth,
            trace=dict(job.trace),
            sandbox=job.sandbox,
            template_files=None if job.template_files is None else dict(job.template_files),
            stack=job.stack,
        )

    @classmethod
    def from_json(cls, text: str) -> RemoteJob:
        data = json.loads(text)
        data["secret_names"] = tuple(data.get("secret_names") or ())
        return cls(**data)

    def check_version(self) -> None:
        if self.version != __version__:
            raise JobRefused(
                f"job made by looprun {self.version}, this worker runs {__version__}: "
                "install the same version on every node"
            )


def describe_template(path: str, repository: str) -> dict[str, str]:
    """How a worker finds the sub-template: by built-in name, by its path inside the
    repository (read at the start commit), or at a shared path it must find unchanged."""
    p = Path(path).resolve()
    builtin = templates_dir().resolve()
    if p.parent == builtin and p.suffix == ".yaml":
        return {"builtin": p.stem}
    digest = hashlib.sha256(p.read_bytes()).hexdigest()
    try:
        rel = p.relative_to(Path(repository).resolve())
    except ValueError:
        return {"path": str(p), "digest": digest}
    return {"repo_path": rel.as_posix(), "digest": digest}


def locate_template(spec: Mapping[str, str], tree: Path) -> str:
    """The template reference a worker loads, checked against the digest it was sent."""
    if "builtin" in spec:
        return spec["builtin"]
    path = tree / spec["repo_path"] if "repo_path" in spec else Path(spec["path"])
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise JobRefused(f"the sub-template {path} cannot be read on this worker: {exc}") from exc
    if hashlib.sha256(data).hexdigest() != spec.get("digest"):
        raise JobRefused(f"the sub-template {path} differs on this worker from the outer loop's")
    return str(path)


def secret_names(*refs: str) -> tuple[str, ...]:
    """The variables the models need (names only: values stay in each worker's env)."""
    schemes = {r.split(":", 1)[0] for r in refs}
    return tuple(sorted(_KEY_VARIABLES[s] for s in schemes if s in _KEY_VARIABLES))
