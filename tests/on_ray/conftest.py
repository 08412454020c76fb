"""A local Ray cluster for the whole session, on 127.0.0.1 only, shut down at the end
(with xdist, one per worker: each starts its own on ports of its own).

Ray is an optional extra (``looprun[ray]``): without it these tests are skipped (in CI,
which installs it, they fail). Its
switches are set before Ray is imported: loopback only, no usage statistics, and no
token authentication (nothing but this machine can reach a loopback cluster). The
folder is not named ``ray``: test modules put ``tests/`` on sys.path, where a folder of
that name would import as Ray itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

if os.environ.get("CI"):  # .ci/run installs the extra before this tier: never a skip there
    import ray
else:
    ray = pytest.importorskip("ray")


def _cluster_processes(marker: str) -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines()[1:] if marker in line]


@pytest.fixture(scope="session")
def ray_address() -> Iterator[str]:
    # workers find python, pytest and ruff where the tests found them
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"]
    temp = tempfile.mkdtemp(prefix="lr-ray-")  # short: Ray's socket paths have a limit
    ctx = ray.init(
        num_cpus=2,
        include_dashboard=False,
        _temp_dir=temp,
        log_to_driver=False,
        configure_logging=False,
    )
    address = ctx.address_info["gcs_address"]
    assert address.startswith("127."), address
    yield address
    ray.shutdown()
    deadline = time.monotonic() + 30
    while _cluster_processes(temp) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _cluster_processes(temp), "Ray processes outlived the test session"
