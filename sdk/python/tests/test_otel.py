"""cumulo.otel: a handler's own OpenTelemetry span joins the request's trace,
and the calls it makes inside that span are the span's children."""

from __future__ import annotations

from typing import Any, List

import pytest
from fakecore import FakeCore, request, tid
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import cumulo.otel
from cumulo import API
from cumulo import messages as m

pytestmark = pytest.mark.usefixtures("use_impl")  # the pure-Python and the C serve loop

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACE = b"traceparent\0" + f"00-{TRACE_ID}-{PARENT_ID}-01".encode() + b"\0tracestate\0congo=t61rcWkgMzE\0"


def test_a_handlers_span_is_the_requests_child_and_the_parent_of_its_calls() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    sent: List[m.SendAsync] = []

    def handler(api: API, req: m.Request) -> Any:
        with tracer.start_as_current_span("work", context=cumulo.otel.context(req)):
            api.send_async("/child", b"", cumulo.otel.inject(b"k\0v\0"))
        # Outside the span: the request's own context, as the SDK appends it.
        api.send_async("/after", b"", cumulo.otel.inject(b"k\0v\0"))
        return b"done"

    def script(core: FakeCore) -> None:
        conn, _ = core.handshake()
        sub = conn.expect(m.Subscribe)
        conn.send(m.Reply(sub.req_id, 0, 0, ""))
        conn.send(request(tid(1), "/tests/a/get", b"", TRACE))
        sent.extend(conn.expect(m.SendAsync) for _ in range(2))
        assert conn.expect(m.Return).response == b"done"
        conn.send(m.Terminate(0))

    core = FakeCore(script)
    with API(address=core.address, prefix="/tests/") as api:
        api.subscribe("a/get", handler)
        assert api.poll() is False
    core.join()

    (span,) = exporter.get_finished_spans()
    assert f"{span.context.trace_id:032x}" == TRACE_ID, "the span is in the request's trace"
    assert span.parent is not None and f"{span.parent.span_id:016x}" == PARENT_ID, "the request's span is its parent"
    child = f"00-{TRACE_ID}-{span.context.span_id:016x}-01".encode()
    assert sent[0].name == "/child"
    assert sent[0].request_info == b"k\0v\0traceparent\0" + child + b"\0tracestate\0congo=t61rcWkgMzE\0"
    assert (sent[1].name, sent[1].request_info) == ("/after", b"k\0v\0" + TRACE), "no span: the SDK's own"


def test_without_a_span_or_a_trace_context_nothing_is_added() -> None:
    assert cumulo.otel.inject(b"k\0v\0") == b"k\0v\0", "no span recording"
    untraced = m.Request(tid(1), 1000, 0, 0, 0, "/a", "/a", b"k\0v\0", b"")
    assert cumulo.otel.inject(b"", context=cumulo.otel.context(untraced)) == b"", "a request without one"
    traced = m.Request(tid(1), 1000, 0, 0, 0, "/a", "/a", TRACE, b"")
    assert cumulo.otel.inject(b"traceparent\0old\0", context=cumulo.otel.context(traced)) == TRACE, "replaced"
