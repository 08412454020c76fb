"""A loopback OTLP/HTTP traces receiver: a real HTTP server on 127.0.0.1 that decodes each
export with the protocol's own protobuf messages and keeps the raw bytes."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass
class Received:
    """What the receiver got: the raw request bodies and the decoded spans."""

    url: str
    bodies: list[bytes] = field(default_factory=list)
    spans: list[Any] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def named(self, prefix: str) -> list[Any]:
        return [s for s in self.spans if s.name.startswith(prefix)]

    def by_id(self) -> dict[bytes, Any]:
        return {s.span_id: s for s in self.spans}


def attrs(span: Any) -> dict[str, Any]:
    """A span's attributes as plain values."""
    out: dict[str, Any] = {}
    for kv in span.attributes:
        kind = kv.value.WhichOneof("value")
        value = getattr(kv.value, kind)
        if kind == "array_value":
            value = [getattr(v, v.WhichOneof("value")) for v in value.values]
        out[kv.key] = value
    return out


@contextmanager
def otlp_receiver() -> Iterator[Received]:
    received = Received(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            with received.lock:
                received.bodies.append(body)
                received.paths.append(self.path)
                received.headers.append({k.lower(): v for k, v in self.headers.items()})
                for rs in request.resource_spans:
                    for ss in rs.scope_spans:
                        received.spans.extend(ss.spans)
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    received.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield received
    finally:
        server.shutdown()
        server.server_close()
