"""Faulty service: /tests/faulty/python/boom raises, /ok answers "ok".

trace_* call the echo service with an empty request_info and answer with the
request_info it got (test_trace.py, PROTOCOL.md 5.1); FAULTY_TRACE_TARGET
names another service to call (test_otlp.py chains services so).
"""

import os

import cumulo

ECHO = os.environ.get("FAULTY_TRACE_TARGET", "/echo/trace")


class FaultyError(Exception):
    pass


def boom(api: cumulo.API, request: cumulo.Request) -> bytes:
    raise FaultyError("boom from python")


def trace_sync(api: cumulo.API, request: cumulo.Request) -> bytes:
    response_info, _ = api.send_sync(ECHO, b"", b"")
    return response_info


def trace_async(api: cumulo.API, request: cumulo.Request) -> bytes:
    return api.recv_async(api.send_async(ECHO, b"", b"")).response_info


def trace_mcast(api: cumulo.API, request: cumulo.Request) -> bytes:
    return api.recv_async(api.mcast_async(ECHO, b"", b"")[0]).response_info


def trace_forward(api: cumulo.API, request: cumulo.Request) -> None:
    api.forward(request, ECHO, b"")


def setup(api: cumulo.API) -> None:
    api.subscribe("boom", boom)
    api.subscribe("ok", lambda api, request: b"ok")
    api.subscribe("trace_sync", trace_sync)
    api.subscribe("trace_async", trace_async)
    api.subscribe("trace_mcast", trace_mcast)
    api.subscribe("trace_forward", trace_forward)


if __name__ == "__main__":
    cumulo.run(setup)
