"""The ``--executor ray`` factory the run and resume commands hand to a run, imported only
when a run asks for it: the Ray executor's modules (the sub-loop worker, git sync) cost a
plain run some 0.3 s of start-up it never uses."""

from __future__ import annotations

from typing import Any


def ray_executors(spec: str, sync_remote: str | None) -> Any:
    """``looprun.remote.ray_executor.ray_executors``, loaded on first use."""
    from looprun.remote.ray_executor import ray_executors as factory

    return factory(spec, sync_remote)
