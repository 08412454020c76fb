"""The ports of a sub-loop that its outer loop can stop: once asked, no model call, check
or agent turn starts, and one that was running (its process group killed by
``LocalExecutor.stop``) is not taken as a finding. The sub-loop then unwinds with
``Stopped``, its journal at the last completed step, and a resume continues there."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from looprun.loop.ports import AgentReport, AgentRequest
from looprun.models.base import Message, Model, Reply, ToolSpec
from looprun.run.executor import Stopped


class StoppableModel:
    """Wraps a model so a running sub-loop stops at its next call once asked to."""

    def __init__(self, inner: Model, stop: threading.Event):
        self.inner, self._stop = inner, stop
        self.ref = inner.ref

    def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        role: str = "act",
        timeout_s: float | None = None,
        max_output_tokens: int | None = None,
    ) -> Reply:
        if self._stop.is_set():
            raise Stopped("stopped: the outer loop was interrupted")
        return self.inner.complete(
            messages, tools, role=role, timeout_s=timeout_s, max_output_tokens=max_output_tokens
        )

    @property
    def position(self) -> int | None:
        return self.inner.position

    def seek(self, position: int) -> None:
        self.inner.seek(position)


class StoppableObserver:
    """Wraps the observer port: once stopped, no check starts, and a check that was
    running (killed by ``LocalExecutor.stop``) is not taken as a finding."""

    def __init__(self, inner: Any, stop: threading.Event):
        self.inner, self._stop = inner, stop

    def observe(self, spec: Any, context: Any, *, deadline: float | None, base: str) -> Any:
        if self._stop.is_set():
            raise Stopped("stopped: the outer loop was interrupted")
        obs = self.inner.observe(spec, context, deadline=deadline, base=base)
        if self._stop.is_set():
            raise Stopped("stopped: the outer loop was interrupted")
        return obs

    def related_tests(self, changed: Any) -> Any:
        return self.inner.related_tests(changed)

    def related_items(self, changes: Any) -> Any:
        return self.inner.related_items(changes)

    def varying_params(self, spec: Any, files: Any) -> Any:
        return self.inner.varying_params(spec, files)

    def keeps_tree(self, spec: Any) -> bool:
        return bool(self.inner.keeps_tree(spec))

    def list_ids(self, spec: Any, context: Any, *, base: str) -> Any:
        if self._stop.is_set():
            raise Stopped("stopped: the outer loop was interrupted")
        listed = self.inner.list_ids(spec, context, base=base)
        if self._stop.is_set():
            raise Stopped("stopped: the outer loop was interrupted")
        return listed


class StoppableActor:
    """Wraps the actor port (act.agent) like the observer: once stopped, no CLI turn
    starts, and a turn the stop killed (``LocalExecutor.stop`` kills its process group)
    is not taken as what the CLI did."""

    def __init__(self, inner: Any, stop: threading.Event):
        self.inner, self._stop = inner, stop

    def act(self, request: AgentRequest) -> AgentReport:
        if self._stop.is_set():
            raise Stopped("stopped: the outer loop was interrupted")
        report = self.inner.act(request)
        if self._stop.is_set():
            raise Stopped("stopped: the outer loop was interrupted")
        return report
