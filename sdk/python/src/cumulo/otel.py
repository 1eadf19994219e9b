"""Joining an application's own OpenTelemetry spans (proto/PROTOCOL.md 5.1).

The SDK passes a request's trace context on by itself: a handler's calls
inherit it. An application that records spans of its own with the
OpenTelemetry API makes them part of the same trace with two calls. The API
(``pip install opentelemetry-api``) is not a dependency of this SDK; only
this module needs it::

    import cumulo.otel

    def handler(api, request):
        with tracer.start_as_current_span("work", context=cumulo.otel.context(request)):
            # this call is the span's child, not the request's
            api.send_sync("/stock/get", b"", request_info=cumulo.otel.inject(b""))

- ``context(request)``: the request's trace context as an OpenTelemetry
  ``Context``, the parent for the spans the handler starts (an empty one
  when the request has none: the span then starts a trace).
- ``inject(request_info, context=None)``: ``request_info`` with the
  ``traceparent`` and ``tracestate`` of the current span (or of
  ``context``) in place of any it had. A call whose request_info names a
  traceparent is sent as it is, so the span's context wins over the one the
  SDK would append; with no span recording, nothing is added.
"""

from __future__ import annotations

from typing import Dict, Optional, Union

from .info import info_encode, info_parse
from .messages import Request

try:
    from opentelemetry.context import Context
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError as missing:  # pragma: no cover - the message is the point
    raise ImportError("cumulo.otel needs the OpenTelemetry API: pip install opentelemetry-api") from missing

__all__ = ["context", "inject"]

_PROPAGATOR = TraceContextTextMapPropagator()
_KEYS = ("traceparent", "tracestate")


def context(request: Request) -> Context:
    """The request's trace context, the parent of the handler's own spans."""
    carrier: Dict[str, str] = {}
    for key, value in info_parse(request.request_info):
        name = key.decode("latin-1")
        if name in _KEYS and name not in carrier:  # the first of a repeated key, as the SDK reads it
            carrier[name] = value.decode("latin-1")
    return _PROPAGATOR.extract(carrier)


def inject(request_info: Union[bytes, bytearray, memoryview] = b"", context: Optional[Context] = None) -> bytes:
    """``request_info`` carrying the current span's trace context (or ``context``'s)."""
    carrier: Dict[str, str] = {}
    _PROPAGATOR.inject(carrier, context=context)
    if not carrier:
        return bytes(request_info)
    pairs = [(k, v) for k, v in info_parse(request_info) if k.decode("latin-1") not in _KEYS]
    pairs += [(k.encode(), carrier[k].encode()) for k in _KEYS if k in carrier]
    return info_encode(pairs)
