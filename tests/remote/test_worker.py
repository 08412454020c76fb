"""A remote worker on real git and a real scripted sub-loop, without any cluster: what any
executor (Ray today) relies on. Duplicates of one attempt, a killed worker resumed from
what it pushed, refused jobs, and secrets that never travel."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from remote_helpers import bare_remote, make_job, project, step_turns, write_script
from tests.support.cli import cli_env

from looprun.remote.gitsync import Remote, extract_commit, sync_ref
from looprun.remote.job import JobRefused
from looprun.remote.worker import check_base_url, run_remote_job
from looprun.workspace.git import Git

WORKER = """
import json, sys
from looprun.remote.job import JobRefused
from looprun.remote.worker import check_base_url, run_remote_job
result = run_remote_job(open(sys.argv[1]).read(), lambda line: print(line, flush=True))
print("RESULT " + json.dumps(result), flush=True)
"""


def _pulled_journal(work: Path, url: str, run_id: str, into: Path) -> list[dict]:
    remote = Remote(Git(work), url)
    ref = sync_ref(run_id, "journal")
    remote.fetch(f"+{ref}:{ref}")
    extract_commit(remote.git, remote.git.run("rev-parse", ref).strip(), into)
    return [json.loads(x) for x in (into / "exchanges.jsonl").read_text().splitlines()]


def test_two_executions_of_one_attempt_have_exactly_one_winner(tmp_path: Path) -> None:
    work = project(tmp_path)
    url = bare_remote(tmp_path, work)
    script = write_script(tmp_path / "script.yaml", step_turns())
    job = make_job(work, url, script).to_json()
    results: list[dict] = []
    barrier = threading.Barrier(2)

    def execute() -> None:
        barrier.wait()
        results.append(run_remote_job(job, lambda line: None))

    threads = [threading.Thread(target=execute) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    outcomes = sorted(r["outcome"] for r in results)
    assert outcomes == ["done", "superseded"], results
    winner = next(r for r in results if r["outcome"] == "done")
    lease = Remote(Git(work), url).lease(json.loads(job)["run_id"])
    assert lease is not None and lease.execution == winner["execution"]
    assert lease.sha == winner["lease"]  # the accepted result is the lease's last push
    assert winner["iterations"] == 3 and winner["commit"]


def test_a_killed_worker_resumes_from_its_last_pushed_step_without_replaying_it(
    tmp_path: Path,
) -> None:
    work = project(tmp_path)
    url = bare_remote(tmp_path, work)
    script = write_script(tmp_path / "script.yaml", step_turns(delay_second_s=30))
    job = make_job(work, url, script)
    (tmp_path / "job.json").write_text(job.to_json())
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(tmp_path / "job.json")],
        cwd=tmp_path,
        env=cli_env(),
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:  # iteration 1 ends, then the model "thinks" for 30 s
        seen.append(line)
        if "] #1 " in line:
            break
    time.sleep(1.0)  # the state save and its push follow the progress line
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert any("worker" in s for s in seen), seen

    # the outer loop fences the lost execution out and resumes the sub-loop elsewhere
    quick = write_script(tmp_path / "script.yaml", step_turns())
    retry = make_job(work, url, quick, run_id=job.run_id, resume=True)
    lines: list[str] = []
    result = run_remote_job(retry.to_json(), lines.append)
    assert result["outcome"] == "done", result
    assert result["iterations"] == 3
    assert any("] #2 " in x for x in lines) and not any("] #1 " in x for x in lines)
    exchanges = _pulled_journal(work, url, job.run_id, tmp_path / "pulled")
    per_iteration = Counter(x["iteration"] for x in exchanges)
    assert per_iteration == {1: 2, 2: 2, 3: 2}, per_iteration  # nothing played twice
    events = [
        json.loads(x) for x in (tmp_path / "pulled" / "journal.jsonl").read_text().splitlines()
    ]
    resumed = [e for e in events if e["event"] == "resumed"]
    assert len(resumed) == 1 and resumed[0]["iteration"] == 1
    # the final tree holds the three files, on the remote's checkpoint ref
    final = Remote(Git(work), url).ls(f"refs/looprun/{job.run_id}/final")
    assert list(final.values()) == [result["commit"]]


def test_jobs_from_another_version_or_without_the_model_key_are_refused(
    tmp_path: Path,
) -> None:
    work = project(tmp_path)
    url = bare_remote(tmp_path, work)
    script = write_script(tmp_path / "script.yaml", step_turns())
    job = make_job(work, url, script)
    old = run_remote_job(replace(job, version="0.0.1").to_json(), lambda line: None)
    assert old["outcome"] == "error" and "0.0.1" in old["reason"]
    keyless = replace(job, secret_names=("LOOPRUN_TEST_ABSENT_KEY",))
    refused = run_remote_job(keyless.to_json(), lambda line: None)
    assert refused["outcome"] == "error" and "LOOPRUN_TEST_ABSENT_KEY" in refused["reason"]
    # a refused job claimed nothing: the lease still waits for an execution
    lease = Remote(Git(work), url).lease(job.run_id)
    assert lease is not None and lease.execution == "-"


def test_secrets_travel_neither_in_the_job_nor_in_the_pushed_journal(
    tmp_path: Path, monkeypatch
) -> None:
    sentinel = "sk-sentinel-4d1f0c9b7e2a"
    monkeypatch.setenv("OPENAI_API_KEY", sentinel)
    work = project(tmp_path)
    url = bare_remote(tmp_path, work)
    script = write_script(tmp_path / "script.yaml", step_turns())
    job = make_job(work, url, script)
    job = replace(job, secret_names=("OPENAI_API_KEY",))
    assert sentinel not in job.to_json()
    result = run_remote_job(job.to_json(), lambda line: None)
    assert result["outcome"] == "done"
    everything = subprocess.run(
        ["git", "-C", url, "cat-file", "--batch-all-objects", "--batch"],
        capture_output=True,
        check=True,
    ).stdout
    assert sentinel.encode() not in everything
    assert b"OPENAI_API_KEY" not in everything or b"secret_names" not in everything


def test_a_worker_names_the_model_servers_it_sends_keys_to_itself(tmp_path: Path) -> None:
    own = {"LOOPRUN_CONFIG": "", "LOOPRUN_RAY_ALLOWED_BASE_URLS": "http://10.0.0.5:8000/v1/, "}
    check_base_url(None, own)  # the worker's own configuration decides
    check_base_url("https://api.openai.com/v1/", own)
    check_base_url("http://10.0.0.5:8000/v1", own)
    with pytest.raises(JobRefused, match="LOOPRUN_RAY_ALLOWED_BASE_URLS"):
        check_base_url("http://10.0.0.5:8001/v1", own)
    config = tmp_path / "config.yaml"
    config.write_text("base_url: http://127.0.0.1:11434/v1\n")
    check_base_url("http://127.0.0.1:11434/v1", {"LOOPRUN_CONFIG": str(config)})
    with pytest.raises(JobRefused, match="does not use"):
        check_base_url("http://127.0.0.1:11434/v1", {"LOOPRUN_CONFIG": ""})


def test_a_job_for_a_foreign_server_or_an_unhonoured_sandbox_claims_nothing(
    tmp_path: Path, monkeypatch
) -> None:
    work = project(tmp_path)
    url = bare_remote(tmp_path, work)
    script = write_script(tmp_path / "script.yaml", step_turns())
    job = make_job(work, url, script)
    models = dict(job.models) | {"base_url": "http://127.0.0.1:9/v1"}
    foreign = run_remote_job(replace(job, models=models).to_json(), lambda line: None)
    assert foreign["code"] == "job_refused" and "does not use" in foreign["reason"]
    monkeypatch.setenv("LOOPRUN_SANDBOX_BACKENDS", "")
    unconfined = run_remote_job(replace(job, sandbox="required").to_json(), lambda line: None)
    assert unconfined["code"] == "job_refused" and "cannot be honoured" in unconfined["reason"]
    lease = Remote(Git(work), url).lease(job.run_id)
    assert lease is not None and lease.execution == "-"
    assert not (tmp_path / "a.txt").exists()
