"""A fake OpenTelemetry collector: an OTLP/HTTP server on loopback that
decodes each export request with the opentelemetry-proto definitions and
keeps the spans, for the tracing tests. It can answer slowly (`delay`), to
show that a slow collector delays no request."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan, Status as PbStatus

KIND = {PbSpan.SPAN_KIND_SERVER: "server", PbSpan.SPAN_KIND_CLIENT: "client",
        PbSpan.SPAN_KIND_INTERNAL: "internal"}


@dataclass
class Span:
    trace_id: str
    span_id: str
    parent_id: str  # "" for a root
    name: str
    kind: str
    service: str  # the resource's service.name
    attrs: dict
    error: str | None  # the status message of an error, else None
    start_ns: int
    end_ns: int


@dataclass
class Collector:
    delay: float = 0.0
    spans: list[Span] = field(default_factory=list)
    requests: int = 0
    lock: threading.RLock = field(default_factory=threading.RLock)

    def start(self) -> "Collector":
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the http.server name
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                assert self.path == "/v1/traces", self.path
                assert self.headers.get("content-type") == "application/x-protobuf", self.headers
                if collector.delay:
                    time.sleep(collector.delay)
                collector.take(ExportTraceServiceRequest.FromString(body))
                out = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def take(self, req: ExportTraceServiceRequest) -> None:
        with self.lock:
            self.requests += 1
            for rs in req.resource_spans:
                service = next((a.value.string_value for a in rs.resource.attributes if a.key == "service.name"), "")
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        attrs = {a.key: _value(a.value) for a in s.attributes}
                        error = s.status.message if s.status.code == PbStatus.STATUS_CODE_ERROR else None
                        self.spans.append(Span(s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(), s.name,
                                               KIND.get(s.kind, str(s.kind)), service, attrs, error,
                                               s.start_time_unix_nano, s.end_time_unix_nano))

    def trace(self, trace_id: str) -> list[Span]:
        with self.lock:
            return [s for s in self.spans if s.trace_id == trace_id]

    def wait(self, what, timeout: float = 10.0):
        """Waits until `what(self)` is true (returns its value), or fails
        with what was received."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self.lock:
                got = what(self)
            if got:
                return got
            time.sleep(0.05)
        raise AssertionError(f"not received within {timeout} s; spans: {self.spans}")


def _value(v):
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None
