"""API.poll's serving loop, in each mode (pure Python, and the C extension's serve).

Every test runs once per codec implementation (fixture ``use_impl``); with the
C codec, API.poll runs ``_ccodec.serve``. They cover what that loop does
itself: batched and pipelined frames, PING, TERMINATE, the socket's end,
write failures, unexpected frames, exceptions that must go up, nested
requests from a handler, timeouts and signals.
"""

from __future__ import annotations

import select
import signal
import time
from types import ModuleType
from typing import Any, List

import pytest
from fakecore import FakeCore, request, tid

from cumulo import API, ConnectionClosed, CumuloError, Status
from cumulo import messages as m

pytestmark = pytest.mark.usefixtures("use_impl")

GET = "/tests/a/get"


def connect(core: FakeCore) -> API:
    return API(address=core.address, prefix="/tests/")


def subscribed(core: FakeCore) -> Any:
    conn, _ = core.handshake()
    sub = conn.expect(m.Subscribe)
    conn.send(m.Reply(sub.req_id, 0, 0, ""))
    return conn


def test_serve_is_the_c_loop_with_the_c_codec(use_impl: ModuleType) -> None:
    def script(core: FakeCore) -> None:
        core.handshake()

    core = FakeCore(script)
    with connect(core) as api:
        assert (api._serve is not None) == (use_impl.__name__ == "cumulo._ccodec")
    core.join()


def test_pipelined_requests_ping_and_terminate_in_one_write() -> None:
    frames: List[m.Message] = []

    def script(core: FakeCore) -> None:
        conn = subscribed(core)
        batch = [request(tid(n), GET, b"%d" % n) for n in range(50)]
        batch.insert(25, m.Ping(77))
        conn.send(*batch, m.Terminate(1000))
        frames.extend(conn.recv() for _ in range(51))
        conn.expect(m.Goodbye)

    core = FakeCore(script)
    with connect(core) as api:
        api.subscribe("a/get", lambda api, req: (b"", b"r" + req.request))
        assert api.poll() is False  # every request already received is served first
    core.join()
    assert m.Pong(77) in frames
    returns = [f for f in frames if isinstance(f, m.Return)]
    assert returns == [m.Return(tid(n), 0, b"", b"r%d" % n) for n in range(50)]


def test_core_closing_the_connection_ends_poll() -> None:
    def script(core: FakeCore) -> None:
        conn = subscribed(core)
        conn.close()

    core = FakeCore(script)
    api = connect(core)
    api.subscribe("a/get", lambda api, req: b"")
    with pytest.raises(ConnectionClosed) as caught:
        api.poll()
    assert caught.value.status is Status.SHUTTING_DOWN and "closed by the core" in caught.value.message
    assert api.closed
    with pytest.raises(ConnectionClosed, match="connection is closed"):
        api.poll(10)
    core.join()


def test_answer_to_a_core_that_has_gone_fails_the_write() -> None:
    def script(core: FakeCore) -> None:
        conn = subscribed(core)
        conn.send(request(tid(1), GET))
        conn.close()

    def handler(api: API, req: m.Request) -> bytes:
        time.sleep(0.2)  # the core is gone by the time the answer is written
        return b"too late"

    core = FakeCore(script)
    api = connect(core)
    api.subscribe("a/get", handler)
    with pytest.raises(ConnectionClosed):
        api.poll()
    assert api.closed
    core.join()


def test_frame_the_core_must_not_send_is_a_protocol_error() -> None:
    def script(core: FakeCore) -> None:
        conn = subscribed(core)
        conn.expect(m.Ping)  # not in the same read as the REPLY
        conn.send(m.Hello(1, 1, 0, "", "/x/"))
        assert conn.closed_by_peer()

    core = FakeCore(script)
    api = connect(core)
    api.subscribe("a/get", lambda api, req: b"")
    api.ping()
    with pytest.raises(CumuloError) as caught:
        api.poll(5000)
    assert caught.value.status is Status.PROTOCOL and "unexpected HELLO" in caught.value.message
    assert api.closed
    core.join()


def test_exception_that_is_not_an_error_goes_up_and_the_queue_is_kept() -> None:
    returns: List[m.Return] = []

    def script(core: FakeCore) -> None:
        conn = subscribed(core)
        conn.send(request(tid(1), GET, b"stop"), request(tid(2), GET, b"next"))
        returns.append(conn.expect(m.Return))
        conn.send(m.Terminate(0))

    def handler(api: API, req: m.Request) -> bytes:
        if req.request == b"stop":
            raise KeyboardInterrupt
        return b"served " + req.request

    core = FakeCore(script)
    with connect(core) as api:
        api.subscribe("a/get", handler)
        with pytest.raises(KeyboardInterrupt):
            api.poll()
        assert api.poll() is False  # the request behind it is still served
    core.join()
    assert returns == [m.Return(tid(2), 0, b"", b"served next")]


def test_handler_sending_sync_while_requests_arrive() -> None:
    returns: List[m.Return] = []

    def script(core: FakeCore) -> None:
        conn = subscribed(core)
        conn.send(request(tid(1), GET, b"outer"))
        send = conn.expect(m.SendSync)
        conn.send(m.Ping(3), request(tid(2), GET, b"inner"))
        assert conn.expect(m.Pong) == m.Pong(3)  # answered while the handler waits
        conn.send(m.Response(send.trans_id, 0, b"", b"answer"))
        returns.extend(conn.expect(m.Return) for _ in range(2))
        conn.send(m.Terminate(0))

    def handler(api: API, req: m.Request) -> bytes:
        if req.request == b"outer":
            return b"outer got " + api.send_sync("/other", b"q")[1]
        return b"inner served"

    core = FakeCore(script)
    with connect(core) as api:
        api.subscribe("a/get", handler)
        assert api.poll() is False
    core.join()
    assert returns == [m.Return(tid(1), 0, b"", b"outer got answer"), m.Return(tid(2), 0, b"", b"inner served")]


def test_poll_zero_serves_what_has_arrived_without_waiting() -> None:
    def script(core: FakeCore) -> None:
        conn = subscribed(core)
        conn.send(request(tid(1), GET, b"now"))
        assert conn.expect(m.Return) == m.Return(tid(1), 0, b"", b"done now")
        conn.send(m.Terminate(0))

    core = FakeCore(script)
    with connect(core) as api:
        api.subscribe("a/get", lambda api, req: b"done " + req.request)
        started = time.monotonic()
        while api.poll(0):  # never waits: True until TERMINATE has come
            assert time.monotonic() - started < 5
            select.select([api._sock], [], [], 0.1)
    core.join()


def test_signal_handler_exception_interrupts_a_blocking_poll() -> None:
    class Alarm(Exception):
        pass

    def ring(signum: int, frame: Any) -> None:
        raise Alarm()

    def script(core: FakeCore) -> None:
        conn = subscribed(core)
        assert conn.closed_by_peer()

    core = FakeCore(script)
    api = connect(core)
    api.subscribe("a/get", lambda api, req: b"")
    previous = signal.signal(signal.SIGALRM, ring)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        started = time.monotonic()
        with pytest.raises(Alarm):
            api.poll()
        assert time.monotonic() - started < 4
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert not api.closed  # the connection is still usable
    api.close()
    core.join()


def test_results_other_than_two_bytes_take_the_general_path() -> None:
    results = {
        b"bytearray": (bytearray(b"i\0j\0"), bytearray(b"ba")),
        b"list info": ([("k", "v")], b"listed"),
        b"triple": (b"", b"x", b"y"),
        b"str": (b"", "text"),
    }

    returns: List[m.Return] = []

    def script(core: FakeCore) -> None:
        conn = subscribed(core)
        conn.send(*(request(tid(n), GET, body) for n, body in enumerate(results)), m.Terminate(0))
        returns.extend(conn.expect(m.Return) for _ in results)

    core = FakeCore(script)
    with connect(core) as api:
        api.subscribe("a/get", lambda api, req: results[req.request])
        assert api.poll() is False
    core.join()
    assert returns[0] == m.Return(tid(0), 0, b"i\0j\0", b"ba")
    assert returns[1] == m.Return(tid(1), 0, b"k\0v\0", b"listed")
    assert returns[2].status == Status.SERVICE_ERROR and b"tuple" in returns[2].response
    assert returns[3].status == Status.SERVICE_ERROR and b"str" in returns[3].response


def test_error_of_a_handler_that_closed_the_api_goes_up() -> None:
    def script(core: FakeCore) -> None:
        conn = subscribed(core)
        conn.send(request(tid(1), GET))
        conn.expect(m.Goodbye)

    def handler(api: API, req: m.Request) -> bytes:
        api.close()
        raise ValueError("closed and failed")

    core = FakeCore(script)
    api = connect(core)
    api.subscribe("a/get", handler)
    with pytest.raises(ValueError, match="closed and failed"):
        api.poll()
    assert api.closed
    core.join()
