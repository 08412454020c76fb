"""An agent CLI's own tools run what the model asks: under ``sandbox: required`` the CLI
runs in the run's sandbox, its model server the one way out. A stand-in CLI does what a
hostile command in its shell would, and prints what worked."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from tests.e2e.e2e_helpers import run_dirs, sample_copy
from tests.support.cli import looprun
from tests.support.fake_agent_cli import install

from looprun.sandbox import backends

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "samples" / "agents" / "bugfix-claude-code.yaml"
KEY = "sk-ant-sandboxed-key-0123456789"


class _Answer(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"model-ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def servers() -> Iterator[tuple[int, int]]:
    """The model server's port, and another loopback service's."""
    model = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    other = socket.socket()
    other.bind(("127.0.0.1", 0))
    other.listen(8)
    threading.Thread(target=model.serve_forever, daemon=True).start()
    try:
        yield model.server_address[1], other.getsockname()[1]
    finally:
        model.shutdown()
        model.server_close()
        other.close()


def _project(tmp_path: Path, backends: str, **env: str) -> tuple[Path, dict[str, str]]:
    """A copy of the invoice sample, and the environment that puts the stand-in CLI on
    PATH as ``claude`` with the sandbox backends to try."""
    work = sample_copy("invoice", tmp_path)
    bindir = tmp_path / "bin"
    install(bindir, "claude")
    path = (str(bindir), str(Path(sys.executable).parent), os.environ["PATH"])
    base = {"PATH": os.pathsep.join(path), "ANTHROPIC_API_KEY": KEY}
    return work, {**base, "LOOPRUN_SANDBOX_BACKENDS": backends, **env}


def _escape(
    tmp_path: Path,
    servers: tuple[int, int],
    backend: str,
    scheme: str = "http",
    *extra: str,
    **more_env: str,
) -> tuple[dict, Path, str]:
    model_port, other_port = servers
    outside = tmp_path / "outside.txt"
    work, env = _project(
        tmp_path,
        backend,
        FAKE_AGENT_MODE="escape",
        ANTHROPIC_BASE_URL=f"{scheme}://127.0.0.1:{model_port}",
        FAKE_ESCAPE_FILE=str(outside),
        FAKE_ESCAPE_PORT=str(other_port),
        FAKE_ESCAPE_URL_VAR="ANTHROPIC_BASE_URL",
        **more_env,
    )
    proc = looprun(
        str(SAMPLE), "--intent", "x", "--json", "--sandbox", "required",
        "--max-iterations", "1", *extra, cwd=work, env=env,
    )  # fmt: skip
    assert (work / ".looprun" / "runs").is_dir(), proc.stderr
    (run,) = run_dirs(work)
    (log,) = (run / "artifacts").glob("agent-001.*.log")
    line = next(x for x in log.read_text().splitlines() if x.startswith("ESCAPE "))
    return json.loads(line[len("ESCAPE ") :]), outside, proc.stderr


def _usable(name: str) -> None:
    (backend,) = backends(name)
    if backend.problem() is not None:
        pytest.skip(f"{name} does not work here: {backend.problem()}")


def test_a_sandboxed_cli_reaches_its_model_server_and_nothing_else(
    tmp_path: Path, servers: tuple[int, int]
) -> None:
    _usable("bwrap")
    found, outside, stderr = _escape(tmp_path, servers, "bwrap")
    assert found["model_server"] == "model-ok", stderr  # through the bridge
    assert found["wrote_outside"] != True and not outside.exists()  # noqa: E712
    assert found["other_port"] != True  # noqa: E712
    assert found["sees_looprun"] is False


def test_a_sandboxed_cli_cannot_read_the_held_out_tests(
    tmp_path: Path, servers: tuple[int, int]
) -> None:
    # the CLI's own shell runs in the run's sandbox, where the held-out tests are hidden
    _usable("bwrap")
    held = tmp_path / "acceptance"
    held.mkdir()
    secret = held / "test_acceptance.py"
    secret.write_text("def test_hidden_q9():\n    assert True\n")
    found, _, stderr = _escape(
        tmp_path, servers, "bwrap", "http", "--set", f"holdout={held}",
        FAKE_ESCAPE_READ=str(secret),
    )  # fmt: skip
    assert found["model_server"] == "model-ok", stderr
    assert str(found["read"]).startswith("no:"), found["read"]
    assert "test_hidden_q9" not in json.dumps(found)


def test_under_landlock_a_held_out_check_with_an_agent_cli_does_not_start(
    tmp_path: Path,
) -> None:
    _usable("landlock")
    held = tmp_path / "acceptance"
    held.mkdir()
    (held / "test_acceptance.py").write_text("def test_hidden_q9():\n    assert True\n")
    work, env = _project(tmp_path, "landlock", FAKE_AGENT_MODE="escape")
    proc = looprun(
        str(SAMPLE), "--intent", "x", "--json", "--sandbox", "required",
        "--max-iterations", "1", "--set", f"holdout={held}", cwd=work, env=env,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "cannot hide the held-out tests" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_under_landlock_only_writes_and_other_ports_are_refused(
    tmp_path: Path, servers: tuple[int, int]
) -> None:
    # no namespace: the host's processes stay visible (docs/security.md says so)
    _usable("landlock")
    found, outside, stderr = _escape(tmp_path, servers, "landlock")
    assert found["model_server"] == "model-ok", stderr
    assert found["wrote_outside"] != True and not outside.exists()  # noqa: E712
    assert found["other_port"] != True  # noqa: E712


def test_an_https_server_is_reached_by_connect_to_it_alone(
    tmp_path: Path, servers: tuple[int, int]
) -> None:
    # a server named by https: the CLI keeps its URL, TLS would run end to end through
    # the proxy it is given, and the proxy joins nothing but that host and port
    _usable("bwrap")
    found, _outside, stderr = _escape(tmp_path, servers, "bwrap", scheme="https")
    assert found["tunnel"] == "model-ok", stderr
    assert found["tunnel_elsewhere"].startswith("HTTP/1.1 403")
    assert found["wrote_outside"] != True and found["other_port"] != True  # noqa: E712


def test_without_a_sandbox_required_refuses_and_auto_says_so(tmp_path: Path) -> None:
    log = tmp_path / "starts.jsonl"
    # no backend: a host where no OS sandbox works
    work, env = _project(tmp_path, "", FAKE_AGENT_LOG=str(log))
    args = (str(SAMPLE), "--intent", "x", "--json", "--max-iterations", "1")
    refused = looprun(*args, "--sandbox", "required", cwd=work, env=env)
    assert refused.returncode != 0 and "sandbox: required" in refused.stderr
    assert "Traceback" not in refused.stderr and not log.exists()  # no CLI turn ran
    ran = looprun(*args, "--sandbox", "auto", cwd=work, env=env)
    assert "claude-code runs without an OS sandbox" in ran.stderr
    assert log.exists()
