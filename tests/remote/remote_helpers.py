"""A project, a shared bare remote and a three-step sub-template for remote-worker tests."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import yaml
from tests.support.git_repos import git_repo

from looprun import __version__
from looprun.remote.gitsync import Remote, sync_ref
from looprun.remote.job import RemoteJob, describe_template
from looprun.workspace.git import Git

# Three iterations, one file each; done when the third file exists.
STEPS = """\
looprun: 1
name: steps
inputs:
  intent: {type: string, required: true}
plan: {mode: none}
act:
  prompt: "{{ intent }}"
  tools: [write_file]
  max_steps: 3
observe:
  third: {run: "test -f c.txt", parser: exit_code}
exit: [third.ok]
refine:
  - else: {retry: "not yet"}
limits: {max_iterations: 5}
"""


def step_turns(delay_second_s: float = 0.0) -> list[dict]:
    turns: list[dict] = []
    for i, name in enumerate(("a.txt", "b.txt", "c.txt")):
        call: dict = {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": name, "content": f"{name}\n"}}
            ]
        }
        if i == 1 and delay_second_s:
            call["delay_s"] = delay_second_s
        turns += [call, {"text": f"wrote {name}"}]
    return turns


def project(tmp: Path) -> Path:
    work = tmp / "proj"
    work.mkdir()
    (work / "README.md").write_text("steps\n")
    (work / "steps.yaml").write_text(STEPS)
    return git_repo(work)


def bare_remote(tmp: Path, source: Path) -> str:
    url = str(tmp / "shared.git")
    subprocess.run(["git", "init", "-q", "--bare", url], check=True)
    subprocess.run(["git", "push", "-q", url, "HEAD:refs/heads/main"], cwd=source, check=True)
    return url


def make_job(
    work: Path, url: str, script: Path, *, run_id: str | None = None, resume: bool = False
) -> RemoteJob:
    """Push the start commit, grant a fresh token, and describe the job as the outer would."""
    run_id = run_id or f"run-{uuid.uuid4().hex[:8]}.steps-1"
    git = Git(work)
    commit = git.run("rev-parse", "HEAD").strip()
    remote = Remote(git, url)
    remote.push([f"+{commit}:{sync_ref(run_id, 'start')}"])
    token = uuid.uuid4().hex
    remote.grant(run_id, token)
    return RemoteJob(
        version=__version__,
        token=token,
        remote=url,
        commit=commit,
        run_id=run_id,
        task_id="steps",
        attempt=1,
        template=describe_template(str(work / "steps.yaml"), str(work)),
        inputs={"intent": "write a, b and c"},
        limits={},
        models={"act": f"script:{script}", "plan": "", "cli_models": {}, "base_url": None},
        resume=resume,
    )


def write_script(path: Path, turns: list[dict]) -> Path:
    path.write_text(yaml.safe_dump({"turns": turns}))
    return path
