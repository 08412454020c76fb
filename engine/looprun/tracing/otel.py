"""A run's spans, built from what its ports record, exported over OTLP/HTTP.

The trace follows the OpenTelemetry GenAI conventions: the run is one ``invoke_workflow``
span; under it a span per task and, under that, one per iteration; under an iteration a
``chat`` span per model call (model, token usage, cost), an ``execute_tool`` span per
tool call and per observer, an ``invoke_agent`` span per agent-CLI turn, and the
sub-loops' own ``invoke_workflow`` spans. Nothing in the loop calls this module: the run's
journal and observers are wrapped (:meth:`RunTrace.journal`, :meth:`RunTrace.observer`),
and the spans are made from the events as they are written. A model call, a tool call or
an agent turn is journaled when it ends; it began where the last recorded step ended.

Attributes hold names, counts and outcomes only; prompts, replies, tool arguments and
results are added (redacted like the journal) only when the user opts in
(``LOOPRUN_OTEL_CONTENT=1``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from looprun.loop.outcome import EXIT_CODES
from looprun.tracing.config import TraceConfig

SCOPE = "looprun"
_PROPAGATOR = TraceContextTextMapPropagator()
# A collector that is down costs a run at most this per export, never its outcome.
EXPORT_TIMEOUT_S = 5.0
_providers: dict[str, TracerProvider] = {}
_providers_lock = threading.Lock()


def _provider(endpoint: str) -> TracerProvider:
    """One provider per endpoint in a process: sub-loops on threads share the run's."""
    with _providers_lock:
        provider = _providers.get(endpoint)
        if provider is None:
            provider = TracerProvider(resource=Resource.create({"service.name": "looprun"}))
            # headers (an auth token) and timeouts come from the standard variables
            exporter = OTLPSpanExporter(endpoint=endpoint, timeout=EXPORT_TIMEOUT_S)
            provider.add_span_processor(BatchSpanProcessor(exporter))
            _providers[endpoint] = provider
        return provider


def _provider_name(model: str) -> str:
    prefix, sep, _ = model.partition(":")
    return prefix if sep else "unknown"


def _model_name(model: str) -> str:
    """The model's name without its provider prefix; a script file by its base name."""
    prefix, sep, rest = model.partition(":")
    if not sep:
        return model
    return rest.rsplit("/", 1)[-1] if prefix == "script" else rest


class RunTrace:
    """The spans of one run (a top-level run or a sub-loop), fed by its ports."""

    def __init__(self, config: TraceConfig, redactor: Any, name: str = ""):
        self.config = config
        self.redact = redactor
        self._tracer = _provider(config.endpoint).get_tracer(SCOPE)
        self._lock = threading.RLock()
        carrier = {"traceparent": config.traceparent}
        if config.tracestate:
            carrier["tracestate"] = config.tracestate
        parent = _PROPAGATOR.extract(carrier) if config.traceparent else otel_context.Context()
        self._now = time.time_ns()
        self.root = self._tracer.start_span(
            f"invoke_workflow {name}".strip(),
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes={"gen_ai.operation.name": "invoke_workflow", "gen_ai.agent.name": name},
            start_time=self._now,
        )
        self._task: Span | None = None
        self._task_id = ""
        self._task_ending = False
        self._iteration: Span | None = None
        self._started = False  # the baseline or a resume is behind: work is in iterations
        self._closed = False
        self._handlers: dict[str, Callable[[Mapping[str, Any]], None]] = {
            "run_started": self._on_run_started,
            "resumed": self._on_resumed,
            "baseline": self._on_baseline,
            "plan": self._on_plan,
            "tool_call": self._on_tool_call,
            "policy_violation": self._on_policy_violation,
            "agent_turn": self._on_agent_turn,
            "limit": self._on_limit,
            "task_done": self._on_task_done,
            "iteration": self._on_iteration,
            "run_finished": self._on_run_finished,
        }

    # -- the wrapped ports ------------------------------------------------------------------

    def journal(self, inner: Any) -> TracedJournal:
        return TracedJournal(inner, self)

    def observer(self, inner: Any) -> TracedObserver:
        return TracedObserver(inner, self)

    def carrier(self) -> dict[str, Any]:
        """The trace config a sub-loop job carries: its run is a child of this iteration."""
        with self._lock:
            parent = self._current()
            headers: dict[str, str] = {}
            _PROPAGATOR.inject(headers, context=trace.set_span_in_context(parent))
        return TraceConfig(
            self.config.endpoint,
            headers.get("traceparent", ""),
            headers.get("tracestate", ""),
            self.config.content,
        ).to_dict()

    def close(self) -> None:
        """End what is still open (a run that stopped on an error) and send the spans."""
        with self._lock:
            if not self._closed:  # no run_finished: interrupted, or stopped by an error
                self.root.set_attribute("error.type", "not_finished")
                self.root.set_status(Status(StatusCode.ERROR))
                self._end_all(time.time_ns())
                self._closed = True
        _provider(self.config.endpoint).force_flush(int(EXPORT_TIMEOUT_S * 1000))

    # -- spans ------------------------------------------------------------------------------

    def _current(self) -> Span:
        """The span work is recorded under: the iteration once the run has begun working."""
        if not self._started:
            return self.root
        if self._iteration is None:
            if self._task is None:
                self._task = self._child(self.root, "task", {"looprun.span": "task"})
                self._task_ending = False
            self._iteration = self._child(self._task, "iteration", {"looprun.span": "iteration"})
        return self._iteration

    def _child(
        self,
        parent: Span,
        name: str,
        attributes: Mapping[str, Any],
        kind: SpanKind = SpanKind.INTERNAL,
        start: int | None = None,
    ) -> Span:
        return self._tracer.start_span(
            name,
            context=trace.set_span_in_context(parent),
            kind=kind,
            attributes=dict(attributes),
            start_time=self._now if start is None else start,
        )

    def _step(
        self, name: str, attributes: Mapping[str, Any], kind: SpanKind, error: str = ""
    ) -> None:
        """A span for a step that just ended and began where the last one ended."""
        now = time.time_ns()
        span = self._child(self._current(), name, attributes, kind)
        if error:
            span.set_attribute("error.type", error)
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=now)
        self._now = now

    def _end_iteration(self, now: int) -> None:
        if self._iteration is not None:
            self._iteration.end(end_time=now)
            self._iteration = None
        if self._task_ending and self._task is not None:
            self._task.end(end_time=now)
            self._task, self._task_id, self._task_ending = None, "", False

    def _end_all(self, now: int) -> None:
        self._task_ending = True
        self._end_iteration(now)
        self.root.end(end_time=now)

    def _text(self, value: Any) -> str:
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        return str(self.redact.text(text))

    # -- what the journal records ------------------------------------------------------------

    def on_event(self, kind: str, data: Mapping[str, Any]) -> None:
        with self._lock:
            if self._closed:
                return
            handler = self._handlers.get(kind)  # events without a span pass by
            if handler is not None:
                handler(data)

    def _on_run_started(self, data: Mapping[str, Any]) -> None:
        name = str(data.get("template") or "")
        self.root.update_name(f"invoke_workflow {name}")
        self.root.set_attribute("gen_ai.agent.name", name)
        self.root.set_attribute("looprun.template", name)

    def _on_resumed(self, data: Mapping[str, Any]) -> None:
        self.root.set_attribute("looprun.resumed", True)
        self._started = True

    def _on_baseline(self, data: Mapping[str, Any]) -> None:
        self._started = True
        self._now = time.time_ns()

    def _on_plan(self, data: Mapping[str, Any]) -> None:
        self._started = True
        self.root.set_attribute("looprun.tasks", len(data.get("tasks") or ()))
        self._now = time.time_ns()

    def _on_tool_call(self, data: Mapping[str, Any]) -> None:
        tool = str(data.get("tool") or "")
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.type": "function",
            "looprun.tool.changed": len(data.get("changed") or ()),
        }
        if self.config.content:
            attributes["gen_ai.tool.call.arguments"] = self._text(data.get("arguments"))
            attributes["gen_ai.tool.call.result"] = self._text(data.get("result"))
        error = "tool_error" if data.get("is_error") else ""
        self._step(f"execute_tool {tool}", attributes, SpanKind.INTERNAL, error)

    def _on_policy_violation(self, data: Mapping[str, Any]) -> None:
        self._current().add_event(
            "looprun.policy_violation",
            {
                "looprun.rule": str(data.get("rule") or ""),
                "gen_ai.tool.name": str(data.get("tool") or ""),
            },
        )

    def _on_agent_turn(self, data: Mapping[str, Any]) -> None:
        cli = str(data.get("cli") or "")
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": cli,
            "gen_ai.usage.input_tokens": int(data.get("prompt_tokens") or 0),
            "gen_ai.usage.output_tokens": int(data.get("completion_tokens") or 0),
        }
        if data.get("model"):
            attributes["gen_ai.request.model"] = str(data["model"])
        if data.get("cost_usd") is not None:
            attributes["looprun.cost_usd"] = float(data.get("cost_usd") or 0.0)
        if data.get("exit_code") is not None:
            attributes["looprun.agent.exit_code"] = int(data["exit_code"])
        error = str(data.get("error") or "")
        self._step(f"invoke_agent {cli}", attributes, SpanKind.CLIENT, error)

    def _on_limit(self, data: Mapping[str, Any]) -> None:
        self._current().add_event("looprun.limit", {"looprun.limit": str(data.get("code") or "")})

    def _on_task_done(self, data: Mapping[str, Any]) -> None:
        self._task_ending = True  # its last iteration's event follows

    def _on_iteration(self, data: Mapping[str, Any]) -> None:
        span = self._current()
        task = str(data.get("task") or "")
        n = int(data.get("iteration") or 0)
        decision = data.get("decision") or {}
        span.update_name(f"iteration {n}")
        span.set_attributes(
            {
                "looprun.iteration": n,
                "looprun.task": task,
                "looprun.exit_ok": bool(data.get("exit_ok")),
                "looprun.decision": str(decision.get("action") or ""),
                "looprun.rule": str(decision.get("rule") or ""),
            }
        )
        if self._task is not None and not self._task_id:
            self._task_id = task
            self._task.update_name(f"task {task}")
            self._task.set_attribute("looprun.task", task)
        now = time.time_ns()
        self._end_iteration(now)
        self._now = now

    def _on_run_finished(self, data: Mapping[str, Any]) -> None:
        outcome = str(data.get("outcome") or "")
        code = str(data.get("code") or "")
        self.root.set_attributes(
            {
                "looprun.outcome": outcome,
                "looprun.reason": self._text(str(data.get("reason") or ""))[:1000],
                "looprun.exit_code": EXIT_CODES.get(outcome, 1),
                "looprun.iterations": int(data.get("iterations") or 0),
            }
        )
        if outcome != "done":
            self.root.set_attribute("error.type", code or outcome)
            self.root.set_status(Status(StatusCode.ERROR))
        self._end_all(time.time_ns())
        self._closed = True

    def on_exchange(self, record: Mapping[str, Any]) -> None:
        with self._lock:
            if self._closed:
                return
            model = str(record.get("model") or "")
            usage = record.get("usage") or {}
            attributes: dict[str, Any] = {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": _provider_name(model),
                "gen_ai.request.model": _model_name(model),
                "gen_ai.usage.input_tokens": int(usage.get("prompt_tokens") or 0),
                "gen_ai.usage.output_tokens": int(usage.get("completion_tokens") or 0),
                "looprun.cost_usd": float(usage.get("cost_usd") or 0.0),
                "looprun.role": str(record.get("role") or ""),
            }
            if record.get("finish"):
                attributes["gen_ai.response.finish_reasons"] = [str(record["finish"])]
            if self.config.content:
                attributes["gen_ai.input.messages"] = self._text(record.get("request"))
                attributes["gen_ai.output.messages"] = self._text(record.get("reply"))
            name = f"chat {attributes['gen_ai.request.model']}"
            self._step(name, attributes, SpanKind.CLIENT)

    def observed(self, name: str, start: int, observation: Any, failed: str = "") -> None:
        """An observer's span, from when it started to now."""
        with self._lock:
            if self._closed:
                return
            now = time.time_ns()
            attributes: dict[str, Any] = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": name,
                "gen_ai.tool.type": "extension",
                "looprun.observer": name,
            }
            if observation is not None:
                attributes["looprun.observer.parser"] = str(observation.parser)
                attributes["looprun.observer.ok"] = bool(observation.ok)
                attributes["looprun.observer.ran"] = bool(observation.ran)
                if observation.exit_code is not None:
                    attributes["looprun.observer.exit_code"] = int(observation.exit_code)
                failed = failed or ("observer_error" if observation.error else "")
            span = self._child(self._current(), f"execute_tool {name}", attributes, start=start)
            if failed:
                span.set_attribute("error.type", failed)
                span.set_status(Status(StatusCode.ERROR))
            span.end(end_time=now)
            self._now = now


class TracedJournal:
    """The run's journal, telling the trace what it records (everything passes through)."""

    def __init__(self, inner: Any, trace_: RunTrace):
        self._inner, self._trace = inner, trace_

    def event(self, kind: str, **data: Any) -> None:
        self._inner.event(kind, **data)
        self._trace.on_event(kind, data)

    def exchange(self, record: Mapping[str, Any]) -> None:
        self._inner.exchange(record)
        self._trace.on_exchange(record)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class TracedObserver:
    """The run's observer port, timing each observer for its span."""

    def __init__(self, inner: Any, trace_: RunTrace):
        self._inner, self._trace = inner, trace_

    def observe(
        self, spec: Any, context: Mapping[str, Any], *, deadline: float | None, base: str
    ) -> Any:
        start = time.time_ns()
        try:
            observation = self._inner.observe(spec, context, deadline=deadline, base=base)
        except BaseException as exc:
            self._trace.observed(spec.name, start, None, type(exc).__name__)
            raise
        self._trace.observed(spec.name, start, observation)
        return observation

    def related_tests(self, changed: Any) -> Any:
        return self._inner.related_tests(changed)

    def related_items(self, changes: Any) -> Any:
        return self._inner.related_items(changes)

    def varying_params(self, spec: Any, files: Any) -> Any:
        return self._inner.varying_params(spec, files)

    def keeps_tree(self, spec: Any) -> bool:
        return bool(self._inner.keeps_tree(spec))

    def list_ids(self, spec: Any, context: Mapping[str, Any], *, base: str) -> Any:
        return self._inner.list_ids(spec, context, base=base)
