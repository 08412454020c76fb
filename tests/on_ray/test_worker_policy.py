"""What a worker node holds against the driver's job, on a real Ray cluster: it sends its
keys only to a model server it knows itself, and it honours ``--sandbox required`` or
refuses the job. A second cluster is started here (one node, on 127.0.0.1) whose node has
no OS sandbox and a model-server allow-list of its own, as a shared cluster's operator
would configure it; it is stopped by the PIDs this module started."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ray_helpers import one_task_project
from tests.support.cli import cli_env, looprun, scripted_run
from tests.support.fake_provider import FakeProvider

WORKER_KEY = "sk-worker-sentinel-7f03a9e1"
ALLOWED = "http://127.0.0.1:9/v1"  # the operator's own server (never called here)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _processes(marker: str) -> list[int]:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [int(x.split()[0]) for x in out.splitlines()[1:] if marker in x]


@pytest.fixture(scope="module")
def locked_down_address() -> Iterator[str]:
    """A one-node cluster whose node has no sandbox backend and its own allow-list."""
    temp = tempfile.mkdtemp(prefix="lr-rp-")  # short: Ray's socket paths have a limit
    port = _free_port()
    env = cli_env(
        {
            "LOOPRUN_SANDBOX_BACKENDS": "",
            "LOOPRUN_RAY_ALLOWED_BASE_URLS": ALLOWED,
            "OPENAI_API_KEY": WORKER_KEY,
            "LOOPRUN_CONFIG": "",
        }
    )
    ray_cli = str(Path(sys.executable).parent / "ray")
    head = subprocess.Popen(
        [
            ray_cli,
            "start",
            "--head",
            "--block",
            f"--port={port}",
            "--node-ip-address=127.0.0.1",
            "--num-cpus=1",
            "--include-dashboard=false",
            "--disable-usage-stats",
            f"--temp-dir={temp}",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or head.poll() is not None:
                    raise AssertionError("the locked-down cluster did not start") from None
                time.sleep(0.5)
        yield address
    finally:
        os.killpg(head.pid, signal.SIGTERM)  # our own group: `ray start --block` and its nodes
        try:
            head.wait(timeout=5)
        except subprocess.TimeoutExpired:  # its orderly shutdown takes about 30 s: not needed
            os.killpg(head.pid, signal.SIGKILL)
            head.wait(timeout=30)
        deadline = time.monotonic() + 5  # Ray's workers do not all end on SIGTERM
        while _processes(temp) and time.monotonic() < deadline:
            time.sleep(0.5)
        for pid in _processes(temp):  # started by this fixture (its temp dir names them)
            os.kill(pid, signal.SIGKILL)


def _project(tmp: Path) -> tuple[Path, Path]:
    return one_task_project(tmp)


def _results(work: Path) -> str:
    """What the outer run recorded of its sub-loop: its record and its journal."""
    run_dir = next((work / ".looprun" / "runs").iterdir())
    return (run_dir / "subloops.json").read_text() + (run_dir / "journal.jsonl").read_text()


def test_a_job_naming_a_foreign_model_server_is_refused_and_no_key_reaches_it(
    tmp_path: Path, locked_down_address: str
) -> None:
    work, _ = _project(tmp_path)
    collector = FakeProvider().start()  # a driver's server, hoping for the nodes' keys
    try:
        proc = looprun(
            str(work / "one.yaml"),
            *["--intent", "abc", "--workdir", str(work), "--model", "openai:gpt-test"],
            *["--base-url", collector.openai_url],
            *["--executor", f"ray:{locked_down_address}", "--json"],
            cwd=work,
            env={"OPENAI_API_KEY": "sk-driver-key"},
            timeout=600,
        )
    finally:
        collector.stop()
    assert collector.requests == []  # nothing, with or without a key, went to it
    assert proc.returncode != 0, proc.stdout
    journal = _results(work)
    assert "does not use" in journal and "LOOPRUN_RAY_ALLOWED_BASE_URLS" in journal, journal
    assert "Traceback" not in proc.stderr
    assert WORKER_KEY not in proc.stdout + proc.stderr + journal


def test_sandbox_required_is_refused_by_a_worker_without_one(
    tmp_path: Path, locked_down_address: str
) -> None:
    work, script = _project(tmp_path)
    proc = looprun(
        *scripted_run(str(work / "one.yaml"), intent="abc", workdir=work, script=script),
        *["--sandbox", "required", "--executor", f"ray:{locked_down_address}", "--json"],
        cwd=work,
        timeout=600,
    )
    assert proc.returncode != 0, proc.stdout
    journal = _results(work)
    assert "--sandbox required cannot be honoured" in journal, journal
    assert not (work / "a.txt").exists()  # the sub-loop never ran unconfined


def test_sandbox_required_travels_to_a_worker_that_honours_it(
    tmp_path: Path, ray_address: str
) -> None:
    work, script = _project(tmp_path)
    proc = looprun(
        *scripted_run(str(work / "one.yaml"), intent="abc", workdir=work, script=script),
        *["--sandbox", "required", "--executor", f"ray:{ray_address}", "--json"],
        cwd=work,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["outcome"] == "done"
    run_dir = next((work / ".looprun" / "runs").iterdir())
    invocation = json.loads((run_dir / "subloops" / "one-1" / "run.json").read_text())
    assert invocation["sandbox"] == "required"  # as the worker ran it
