"""A handler's outgoing requests inherit the trace context of the request it
handles, in every SDK (proto/PROTOCOL.md 5.1): each faulty service's
trace_* handler calls the echo service with an empty request_info (send_sync;
send_async then recv_async; mcast_async then recv_async; forward), and the
echo answers with the request_info it got."""

from __future__ import annotations

import pytest

import cumulo
from conftest import FAULTY, FAULTY_LANGUAGES, cell

PARENT = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
STATE = b"congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
CALLS = ("trace_sync", "trace_async", "trace_mcast", "trace_forward")


def echoed(api, lang: str, call: str, request_info: bytes) -> list[tuple[bytes, bytes]]:
    """The pairs the echo service got from `lang`'s handler `call`."""
    info, body = api.send_sync(FAULTY.format(lang) + call, b"", request_info=request_info, timeout=10_000)
    # forward: the echo answers this client itself, its request_info as response_info.
    return cumulo.info_parse(info if call == "trace_forward" else body)


@pytest.mark.parametrize("lang", [pytest.param(lang, marks=cell(lang, "trace")) for lang in FAULTY_LANGUAGES])
def test_a_handlers_calls_carry_its_requests_trace_context(core, api, lang):
    sent = cumulo.info_encode([(b"accept", b"text/plain"), (b"traceparent", PARENT), (b"tracestate", STATE)])
    for call in CALLS:
        pairs = echoed(api, lang, call, sent)
        assert pairs == [(b"traceparent", PARENT), (b"tracestate", STATE)], f"{lang} {call}: {pairs}"

    # Only traceparent: only it is passed on. Neither: nothing is.
    only_parent = cumulo.info_encode([(b"traceparent", PARENT)])
    assert echoed(api, lang, "trace_sync", only_parent) == [(b"traceparent", PARENT)], lang
    for call in CALLS:
        assert echoed(api, lang, call, cumulo.info_encode([(b"accept", b"text/plain")])) == [], f"{lang} {call}"
