"""Where an outer loop's sub-loops run: threads here, or (``--executor ray``) a cluster.

The Ray executor sits above this package (``looprun.remote``), so the CLI hands it in as
``RemoteExecutors``; run/ itself knows only the local one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from looprun.errors import UsageError
from looprun.run.executor import Executor, Report
from looprun.run.subrun import local_executor

ExecutorFactory = Callable[[int, Report], Executor]
# (spec such as "ray" or "ray:ADDRESS", the --sync-remote) -> a factory of executors there
RemoteExecutors = Callable[[str, "str | None"], ExecutorFactory]


def executor_spec(option: str | None) -> str:
    """Where sub-loops run: ``--executor`` > ``LOOPRUN_EXECUTOR`` > local threads."""
    spec = option or os.environ.get("LOOPRUN_EXECUTOR") or "local"
    if spec != "local" and spec.partition(":")[0] != "ray":
        raise UsageError(f"--executor {spec}: expected local, ray or ray:ADDRESS")
    return spec


def executor_factory(
    invocation: Mapping[str, Any], remote: RemoteExecutors | None, *, warm: bool = False
) -> ExecutorFactory:
    """The factory for the invocation's executor; a missing Ray stops the run here.
    ``warm``: the run has sub-loops, so a factory that can (``warm_up``: Ray's) starts
    joining its cluster now, while the run sets up, rather than at its first sub-loop."""
    spec = invocation.get("executor") or "local"
    if spec == "local":
        return local_executor
    if remote is None:
        raise UsageError(f"--executor {spec}: this entry point runs sub-loops only locally")
    factory = remote(spec, invocation.get("sync_remote"))
    start = getattr(factory, "warm_up", None)
    if warm and start is not None:
        start()
    return factory
