"""Whether a run is traced, and where to: read from the environment the CLI hands in.

Nothing here imports OpenTelemetry: a run without ``--otel`` and without
``OTEL_EXPORTER_OTLP_ENDPOINT`` never loads it, and one with them loads it only through
:func:`open_trace`.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Any

from looprun.data.value import valueclass
from looprun.errors import UsageError

DEFAULT_ENDPOINT = "http://localhost:4318"
CONTENT_VARIABLE = "LOOPRUN_OTEL_CONTENT"
NEEDED = (
    "opentelemetry.sdk",
    "opentelemetry.exporter.otlp.proto.http",
)


@valueclass
class TraceConfig:
    """Where the spans go and what they may hold; plain data, so a sub-loop job carries it."""

    endpoint: str  # the OTLP/HTTP traces URL (…/v1/traces)
    traceparent: str = ""  # W3C trace context of the parent span; empty: a new trace
    tracestate: str = ""
    content: bool = False  # prompts, replies, tool arguments and results in attributes

    def to_dict(self) -> dict[str, Any]:
        return {
            "endpoint": self.endpoint,
            "traceparent": self.traceparent,
            "tracestate": self.tracestate,
            "content": self.content,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TraceConfig:
        return cls(
            str(data.get("endpoint") or ""),
            str(data.get("traceparent") or ""),
            str(data.get("tracestate") or ""),
            bool(data.get("content")),
        )


def traces_endpoint(env: Mapping[str, str]) -> str:
    """The OTLP/HTTP traces URL the standard variables name (the signal-specific one as
    given, the general one with ``/v1/traces`` added)."""
    specific = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if specific:
        return specific
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or DEFAULT_ENDPOINT
    return base.rstrip("/") + "/v1/traces"


def installed() -> bool:
    """The ``looprun[otel]`` extra is there (found without importing it)."""
    try:
        return all(importlib.util.find_spec(name) is not None for name in NEEDED)
    except ModuleNotFoundError:
        return False


def trace_config(env: Mapping[str, str], *, flag: bool, warn: Any = None) -> TraceConfig | None:
    """The run's tracing, or None when it is not traced.

    ``--otel`` (``flag``) without the extra is a usage error; an endpoint in the
    environment without it (set for other tools, say) is a warning and no trace.
    ``OTEL_SDK_DISABLED=true`` turns tracing off, as for any OpenTelemetry SDK.
    """
    wanted = flag or any(
        env.get(name, "").strip()
        for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )
    if not wanted or env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if not installed():
        message = "OpenTelemetry traces need the otel extra: pip install 'looprun[otel]'"
        if flag:
            raise UsageError("--otel: " + message)
        if warn is not None:
            warn(
                "warning: OTEL_EXPORTER_OTLP_ENDPOINT is set, but the run is not traced: " + message
            )
        return None
    return TraceConfig(
        endpoint=traces_endpoint(env),
        traceparent=env.get("TRACEPARENT", "").strip(),
        tracestate=env.get("TRACESTATE", "").strip(),
        content=env.get(CONTENT_VARIABLE, "").strip().lower() in ("1", "true", "yes"),
    )


def open_trace(config: TraceConfig, redactor: Any, name: str) -> Any:
    """The spans of run ``name``: a :class:`looprun.tracing.otel.RunTrace` (this loads
    OpenTelemetry); ``redactor`` is the journal's, for opted-in content."""
    from looprun.tracing import otel

    return otel.RunTrace(config, redactor, name)
