"""Session logic of cumulo.API against a fake core over real sockets.

Every test runs once per codec implementation (fixture ``use_impl``).
"""

from __future__ import annotations

import struct
import time
from types import ModuleType
from typing import Any, Dict, List

import pytest
from fakecore import FakeCore, request, tid

import cumulo
from cumulo import API, ConnectionClosed, CumuloError, DecodeError, Status
from cumulo import messages as m
from cumulo.api import REQUEST_OVERHEAD

pytestmark = pytest.mark.usefixtures("use_impl")

GET = "/tests/a/get"


def connect(core: FakeCore, **options: Any) -> API:
    options.setdefault("prefix", "/tests/")
    return API(address=core.address, **options)


def subscribe_reply(conn: Any, value: int = 0) -> m.Subscribe:
    sub = conn.expect(m.Subscribe)
    conn.send(m.Reply(sub.req_id, 0, value, ""))
    return sub


def test_codec_fixture_is_in_use(use_impl: ModuleType) -> None:
    assert cumulo.codec.decode_frames is use_impl.decode_frames


def test_handshake_managed(monkeypatch: pytest.MonkeyPatch) -> None:
    hellos: List[m.Hello] = []

    def script(core: FakeCore) -> None:
        conn, hello = core.handshake(process_index=2, process_count=3, thread_count=2, window=4,
                                     priority_default=-3, prefix="/svc/", node_id=0x01020304)
        hellos.append(hello)
        conn.expect(m.Goodbye)
        assert conn.closed_by_peer()

    core = FakeCore(script)
    monkeypatch.setenv("CUMULO_SOCKET", core.address)
    monkeypatch.setenv("CUMULO_TOKEN", "c0ffee")
    with API(1, window=8) as api:
        assert (api.process_index, api.process_count, api.thread_count) == (2, 3, 2)
        assert (api.prefix, api.window, api.priority_default) == ("/svc/", 4, -3)
        assert (api.node_id, api.instance_id, api.max_frame) == (0x01020304, 7, 1 << 20)
        assert (api.timeout_async, api.timeout_sync, api.timeout_terminate) == (5000, 5000, 2000)
        assert api.new_trans_id()[8:] == bytes.fromhex("0102030400000007")
    assert api.closed
    core.join()
    assert hellos == [m.Hello(1, 8, 1, "c0ffee", "")]


def test_unmanaged_hello_names_its_prefix() -> None:
    def script(core: FakeCore) -> None:
        conn, hello = core.handshake()
        assert hello == m.Hello(1, 1, 0, "", "/tests/")

    core = FakeCore(script)
    connect(core).close()
    core.join()


def test_unmanaged_without_prefix_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUMULO_TOKEN", raising=False)
    with pytest.raises(ValueError, match="prefix"):
        API(address="/nonexistent.sock")


def test_error_on_handshake_is_raised() -> None:
    def script(core: FakeCore) -> None:
        conn = core.accept()
        conn.expect(m.Hello)
        conn.send(m.ErrorFrame(Status.UNAUTHORIZED, "unknown token"))
        assert conn.closed_by_peer()

    core = FakeCore(script)
    with pytest.raises(CumuloError) as caught:
        connect(core, token="bad")
    core.join()
    assert caught.value.status is Status.UNAUTHORIZED
    assert caught.value.message == "unknown token"
    assert str(caught.value) == "UNAUTHORIZED: unknown token"


def test_close_before_welcome() -> None:
    def script(core: FakeCore) -> None:
        conn = core.accept()
        conn.expect(m.Hello)
        conn.close()

    core = FakeCore(script)
    with pytest.raises(ConnectionClosed):
        connect(core)
    core.join()


def test_subscribe_count_unsubscribe() -> None:
    def script(core: FakeCore) -> None:
        conn, _ = core.handshake()
        first = subscribe_reply(conn)
        assert first.pattern == "a/get"
        second = subscribe_reply(conn)
        assert second.req_id != first.req_id
        count = conn.expect(m.SubscribeCount)
        conn.send(m.Reply(count.req_id, 0, 2, ""))
        unsub = conn.expect(m.Unsubscribe)
        assert unsub.pattern == "a/get"
        conn.send(m.Reply(unsub.req_id, 0, 0, ""))
        bad = conn.expect(m.Subscribe)
        assert bad.pattern == "a**"
        conn.send(m.Reply(bad.req_id, Status.INVALID_ARGUMENT, 0, "two wildcards side by side"))

    core = FakeCore(script)
    api = connect(core)
    api.subscribe("a/get", lambda api, req: b"x")
    api.subscribe("a/get", lambda api, req: b"y")
    assert api.subscribe_count("a/get") == 2
    api.unsubscribe("a/get")
    with pytest.raises(CumuloError) as caught:
        api.subscribe("a**", lambda api, req: None)
    assert caught.value.status is Status.INVALID_ARGUMENT
    assert "side by side" in caught.value.message
    api.close()
    core.join()


def test_request_handled_and_returned() -> None:
    seen: List[m.Request] = []
    results: Dict[str, Any] = {
        "/tests/bytes": b"plain",
        "/tests/pair": (b"k\0v\0", b"with info"),
        "/tests/mapping": ({"content-type": "text/xml"}, bytearray(b"mapped")),
        "/tests/none": None,
    }

    def handler(api: API, req: m.Request) -> Any:
        seen.append(req)
        return results[req.pattern]

    returns: List[m.Return] = []

    def script(core: FakeCore) -> None:
        conn, _ = core.handshake()
        for _ in results:
            subscribe_reply(conn)
        # Two requests in one write: both answered.
        conn.send(request(tid(1), "/tests/bytes", b"body", b"a\0b\0", name="/tests/bytes"),
                  request(tid(2), "/tests/pair", flags=m.FLAG_MCAST))
        returns.extend(conn.expect(m.Return) for _ in range(2))
        conn.send(request(tid(3), "/tests/mapping"), request(tid(4), "/tests/none"), m.Terminate(1000))
        returns.extend(conn.expect(m.Return) for _ in range(2))
        conn.expect(m.Goodbye)

    core = FakeCore(script)
    with connect(core) as api:
        for pattern in results:
            api.subscribe(pattern[len("/tests/"):], handler)
        assert api.poll() is False
    core.join()
    assert returns == [
        m.Return(tid(1), 0, b"", b"plain"),
        m.Return(tid(2), 0, b"k\0v\0", b"with info"),
        m.Return(tid(3), 0, b"content-type\0text/xml\0", b"mapped"),
        m.Return(tid(4), 0, b"", b""),
    ]
    first = seen[0]
    assert (first.name, first.request, first.request_info) == ("/tests/bytes", b"body", b"a\0b\0")
    assert first.timeout == 4000
    assert first.sync and not first.mcast and first.source == (1 << 32) | 9
    assert seen[1].mcast and not seen[1].sync


def test_handler_exception_then_next_request_served() -> None:
    def handler(api: API, req: m.Request) -> bytes:
        if req.request == b"fail":
            raise ValueError("bad input")
        if req.request == b"wrong type":
            return 42  # type: ignore[return-value]
        return b"ok " + req.request

    returns: List[m.Return] = []

    def script(core: FakeCore) -> None:
        conn, _ = core.handshake()
        subscribe_reply(conn)
        for n, body in enumerate([b"fail", b"wrong type", b"fine"]):
            conn.send(request(tid(n), GET, body))
            returns.append(conn.expect(m.Return))
        conn.send(request(tid(9), "/tests/unknown"))
        returns.append(conn.expect(m.Return))
        conn.send(m.Terminate(100))

    core = FakeCore(script)
    with connect(core) as api:
        api.subscribe("a/get", handler)
        assert api.poll() is False
    core.join()
    assert returns[0] == m.Return(tid(0), Status.SERVICE_ERROR, b"", b"handler raised ValueError: bad input")
    assert returns[1].status == Status.SERVICE_ERROR and b"int" in returns[1].response
    assert returns[2] == m.Return(tid(2), 0, b"", b"ok fine")
    assert returns[3].status == Status.NO_SERVICE


def test_send_sync_while_ping_response_and_request_arrive() -> None:
    unrelated = tid(5, instance=7)
    sent: List[m.SendSync] = []

    def script(core: FakeCore) -> None:
        conn, _ = core.handshake(priority_default=2)
        subscribe_reply(conn)
        send = conn.expect(m.SendSync)
        sent.append(send)
        conn.send(m.Ping(99))
        assert conn.expect(m.Pong) == m.Pong(99)  # answered while send_sync waits
        conn.send(m.Response(unrelated, 0, b"", b"for later"), request(tid(6), GET, b"queued"))
        conn.send(m.Response(send.trans_id, 0, b"i\0j\0", b"the answer"))
        ret = conn.expect(m.Return)  # the queued request, served by poll
        assert ret == m.Return(tid(6), 0, b"", b"served queued")
        conn.send(m.Terminate(100))

    core = FakeCore(script)
    with connect(core) as api:
        api.subscribe("a/get", lambda api, req: b"served " + req.request)
        before = time.time_ns()
        assert api.send_sync("/other/x", b"question", b"q\0r\0") == (b"i\0j\0", b"the answer")
        assert api.recv_async(unrelated, timeout=0).response == b"for later"
        assert api.poll() is False
    core.join()
    send = sent[0]
    assert (send.name, send.request, send.request_info) == ("/other/x", b"question", b"q\0r\0")
    assert (send.timeout, send.priority, send.flags) == (0, 2, 0)
    stamp, node, instance = struct.unpack(">QII", send.trans_id)
    assert (node, instance) == (1, 7) and before <= stamp <= time.time_ns()


def test_send_sync_error_status_raises() -> None:
    def script(core: FakeCore) -> None:
        conn, _ = core.handshake()
        send = conn.expect(m.SendSync)
        assert (send.timeout, send.priority, send.flags) == (250, -1, m.FLAG_WAIT_FOR_SERVICE)
        conn.send(m.Response(send.trans_id, Status.TIMEOUT, b"", "timeout after 250 ms".encode()))
        send = conn.expect(m.SendSync)
        conn.send(m.Response(send.trans_id, 77, b"x\0y\0", b"future code"))
        send = conn.expect(m.SendSync)
        conn.send(m.Response(send.trans_id, 13, b"", b"/crashy/ was given up"))

    core = FakeCore(script)
    with connect(core) as api:
        with pytest.raises(CumuloError) as caught:
            api.send_sync("/slow", b"", timeout=250, priority=-1, wait_for_service=True)
        assert caught.value.status is Status.TIMEOUT
        assert caught.value.message == "timeout after 250 ms"
        assert caught.value.trans_id is not None and caught.value.trans_id[8:] == tid(0)[8:]
        with pytest.raises(CumuloError) as caught:
            api.send_sync("/future", b"")
        assert caught.value.status == 77 and caught.value.status.name == "UNKNOWN_77"
        assert caught.value.response_info == b"x\0y\0"
        with pytest.raises(CumuloError) as caught:
            api.send_sync("/crashy/", b"")
        assert caught.value.status is Status.UNAVAILABLE and caught.value.status == 13
        assert str(caught.value) == "UNAVAILABLE: /crashy/ was given up"
    core.join()


def test_send_async_and_recv_async() -> None:
    def script(core: FakeCore) -> None:
        conn, _ = core.handshake()
        first = conn.expect(m.SendAsync)
        second = conn.expect(m.SendAsync)
        assert first.trans_id < second.trans_id  # time-ordered, strictly increasing
        conn.send(m.Response(second.trans_id, 0, b"", b"two"),
                  m.Response(first.trans_id, Status.NO_SERVICE, b"", b"no service subscribes /b"))
        third = conn.expect(m.SendAsync)
        conn.send(m.Response(third.trans_id, 0, b"", b"three"))

    core = FakeCore(script)
    with connect(core) as api:
        one = api.send_async("/a", b"1", timeout=1000)
        two = api.send_async("/b", b"2")
        response = api.recv_async(one)
        assert (response.trans_id, response.status) == (one, Status.NO_SERVICE)
        assert api.recv_async().response == b"two"
        with pytest.raises(CumuloError) as caught:
            api.recv_async(timeout=50)
        assert caught.value.status is Status.TIMEOUT
        three = api.send_async("/c", b"3")
        assert api.recv_async() == m.Response(three, 0, b"", b"three")
        assert two != three
    core.join()


def test_mcast_async() -> None:
    copies = (tid(100, instance=0), tid(101, instance=0))

    def script(core: FakeCore) -> None:
        conn, _ = core.handshake()
        call = conn.expect(m.McastAsync)
        assert call.name == "/tests/*" and call.request == b"all"
        # A copy may be answered before the core's MCAST_SENT is read.
        conn.send(m.Response(copies[1], 0, b"", b"copy 2"), m.McastSent(call.trans_id, copies))
        conn.send(m.Response(copies[0], 0, b"", b"copy 1"))
        call = conn.expect(m.McastAsync)
        conn.send(m.McastSent(call.trans_id, ()))
        call = conn.expect(m.McastAsync)
        conn.send(m.Response(call.trans_id, Status.MALFORMED, b"", b"trans_id of another instance"))

    core = FakeCore(script)
    with connect(core) as api:
        assert api.mcast_async("/tests/*", b"all") == list(copies)
        assert api.recv_async(copies[0]).response == b"copy 1"
        assert api.recv_async(copies[1]).response == b"copy 2"
        assert api.mcast_async("/nobody/*", b"") == []
        with pytest.raises(CumuloError) as caught:
            api.mcast_async("/x", b"")
        assert caught.value.status is Status.MALFORMED
    core.join()


def test_forward_sends_no_return() -> None:
    def handler(api: API, req: m.Request) -> Any:
        if req.request == b"forward me":
            api.forward(req, "/elsewhere", timeout=100)
            return None
        return b"answered"

    def script(core: FakeCore) -> None:
        conn, _ = core.handshake()
        subscribe_reply(conn)
        conn.send(request(tid(1), GET, b"forward me", b"k\0v\0"), request(tid(2), GET, b"normal"))
        assert conn.expect(m.Forward) == m.Forward(tid(1), 100, 0, 0, "/elsewhere", b"k\0v\0", b"forward me")
        assert conn.expect(m.Return) == m.Return(tid(2), 0, b"", b"answered")
        conn.send(m.Terminate(0))

    core = FakeCore(script)
    with connect(core) as api:
        api.subscribe("a/get", handler)
        assert api.poll() is False
    core.join()


TRACEPARENT = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
TRACE = b"traceparent\0" + TRACEPARENT + b"\0tracestate\0congo=t61rcWkgMzE\0"


def test_handler_calls_inherit_the_trace_context() -> None:
    """PROTOCOL.md 5.1: a handler's calls carry R's traceparent and tracestate."""
    sent: List[Any] = []
    handled: List[bytes] = []
    handler_failed = ValueError("after sending")

    def handler(api: API, req: m.Request) -> Any:
        handled.append(req.request)
        if req.request == b"fail":
            api.send_async("/failing", b"")
            raise handler_failed
        if req.request == b"forward":
            api.forward(req, "/fwd/given", b"k\0v\0")
            return None
        assert api.send_sync("/sync", b"", b"k\0v\0") == (b"", b"answer")
        api.send_async("/async", b"")
        assert api.mcast_async("/mcast/*", b"") == []
        own = b"traceparent\0" + TRACEPARENT.replace(b"-01", b"-00") + b"\0"
        api.send_async("/own", b"", own)
        api.send_async("/malformed", b"", b"no nul")
        return b"done"

    def script(core: FakeCore) -> None:
        conn, _ = core.handshake()
        subscribe_reply(conn)
        conn.send(request(tid(1), GET, b"calls", b"a\0b\0" + TRACE))
        call = conn.expect(m.SendSync)
        sent.append(call)
        conn.send(m.Response(call.trans_id, 0, b"", b"answer"))
        sent.append(conn.expect(m.SendAsync))
        call = conn.expect(m.McastAsync)
        sent.append(call)
        conn.send(m.McastSent(call.trans_id, ()))
        sent.extend(conn.expect(m.SendAsync) for _ in range(2))
        assert conn.expect(m.Return).response == b"done"
        # Only traceparent; then forwards, with the handler's own info and with R's.
        conn.send(request(tid(2), GET, b"forward", b"traceparent\0" + TRACEPARENT + b"\0"),
                  request(tid(3), GET, b"fail", TRACE))
        sent.append(conn.expect(m.Forward))
        sent.append(conn.expect(m.SendAsync))
        assert conn.expect(m.Return).status == Status.SERVICE_ERROR
        sent.append(conn.expect(m.SendAsync))  # made after poll returned: outside any handler
        conn.send(m.Terminate(0))

    core = FakeCore(script)
    with connect(core) as api:
        api.subscribe("a/get", handler)
        while len(handled) < 3:
            assert api.poll(50) is True
        api.send_async("/outside", b"", b"x\0y\0")
        assert api.poll() is False
    core.join()
    infos = [(call.name, call.request_info) for call in sent]
    assert infos == [
        ("/sync", b"k\0v\0" + TRACE),
        ("/async", TRACE),
        ("/mcast/*", TRACE),
        ("/own", b"traceparent\0" + TRACEPARENT.replace(b"-01", b"-00") + b"\0"),
        ("/malformed", b"no nul"),
        ("/fwd/given", b"k\0v\0traceparent\0" + TRACEPARENT + b"\0"),
        ("/failing", TRACE),
        ("/outside", b"x\0y\0"),
    ]


def test_requests_without_traceparent_add_nothing() -> None:
    sent: List[m.SendAsync] = []

    def handler(api: API, req: m.Request) -> Any:
        api.send_async("/call", b"", b"k\0v\0" if req.request == b"info" else b"")
        if req.request == b"forward":
            api.forward(req, "/fwd")
            return None
        return b""

    def script(core: FakeCore) -> None:
        conn, _ = core.handshake()
        subscribe_reply(conn)
        # No info; other keys (and "traceparent" only as a value); tracestate alone.
        conn.send(request(tid(1), GET, b""),
                  request(tid(2), GET, b"info", b"x\0traceparent\0tracestate\0a=b\0"),
                  request(tid(3), GET, b"forward", b"tracestate\0a=b\0"))
        for _ in range(2):
            sent.append(conn.expect(m.SendAsync))
            conn.expect(m.Return)
        sent.append(conn.expect(m.SendAsync))
        assert conn.expect(m.Forward).request_info == b"tracestate\0a=b\0"
        conn.send(m.Terminate(0))

    core = FakeCore(script)
    with connect(core) as api:
        api.subscribe("a/get", handler)
        assert api.poll() is False
        assert api._trace is None
    core.join()
    assert [call.request_info for call in sent] == [b"", b"k\0v\0", b""]


def test_oversized_frames_refused_both_ways() -> None:
    def script(core: FakeCore) -> None:
        conn, _ = core.handshake(max_frame=1024)
        subscribe_reply(conn)
        small = conn.expect(m.SendAsync)  # the oversized one was never written
        assert small.request == b"small"
        conn.send(request(tid(1), GET, b"big answer please"))
        ret = conn.expect(m.Return)
        assert ret.status == Status.TOO_LARGE and ret.response.startswith(b"response of")
        conn.send_raw(struct.pack("<IB", 1024 + REQUEST_OVERHEAD + 1, m.REQUEST))
        assert conn.closed_by_peer()

    core = FakeCore(script)
    api = connect(core)
    api.subscribe("a/get", lambda api, req: b"x" * 2000)
    with pytest.raises(CumuloError) as caught:
        api.send_async("/x", b"y" * 2000)
    assert caught.value.status is Status.TOO_LARGE
    api.send_async("/x", b"small")
    with pytest.raises(DecodeError) as refused:
        api.poll()
    assert refused.value.status is Status.TOO_LARGE
    assert api.closed
    core.join()


def test_malformed_frame_from_core_closes() -> None:
    def script(core: FakeCore) -> None:
        conn, _ = core.handshake()
        conn.expect(m.Ping)  # not sent along with WELCOME
        conn.send_raw(bytes.fromhex("010000007e"))
        assert conn.closed_by_peer()

    core = FakeCore(script)
    api = connect(core)
    api.ping()
    with pytest.raises(DecodeError) as caught:
        api.poll()
    assert caught.value.status is Status.MALFORMED and api.closed
    with pytest.raises(ConnectionClosed):
        api.poll()
    core.join()


def test_error_frame_after_welcome() -> None:
    def script(core: FakeCore) -> None:
        conn, _ = core.handshake()
        conn.expect(m.Ping)
        conn.send(m.ErrorFrame(Status.PROTOCOL, "frame out of order"))

    core = FakeCore(script)
    api = connect(core)
    api.ping()
    with pytest.raises(CumuloError) as caught:
        api.poll(5000)
    assert (caught.value.status, caught.value.message) == (Status.PROTOCOL, "frame out of order")
    assert api.closed
    core.join()


def test_frames_split_anywhere_and_large_frames() -> None:
    big = bytes(range(256)) * 1200  # 300 KiB: over the read buffer

    def script(core: FakeCore) -> None:
        conn, _ = core.handshake()
        subscribe_reply(conn)
        data = b"".join(m_encode(request(tid(n), GET, b"%d" % n)) for n in range(3))
        for i in range(len(data)):  # one byte per write
            conn.send_raw(data[i:i + 1])
        for n in range(3):
            assert conn.expect(m.Return) == m.Return(tid(n), 0, b"", b"got %d" % n)
        conn.send(request(tid(7), GET, big))
        assert conn.expect(m.Return).response == b"got %d bytes" % len(big)
        conn.send(m.Terminate(0))

    def handler(api: API, req: m.Request) -> bytes:
        if len(req.request) > 100:
            assert req.request == big
            return b"got %d bytes" % len(req.request)
        return b"got " + req.request

    core = FakeCore(script)
    with connect(core) as api:
        api.subscribe("a/get", handler)
        assert api.poll() is False
    core.join()


def m_encode(message: m.Message) -> bytes:
    return cumulo.codec.encode(message)


def test_poll_timeout_returns_true_and_ping_answered() -> None:
    def script(core: FakeCore) -> None:
        conn, _ = core.handshake()
        conn.send(m.Ping(5))
        assert conn.expect(m.Pong) == m.Pong(5)
        conn.expect(m.Ping)
        conn.send(m.Pong(0), m.Terminate(0))

    core = FakeCore(script)
    with connect(core) as api:
        started = time.monotonic()
        assert api.poll(100) is True
        assert 0.09 <= time.monotonic() - started < 2
        api.ping()
        assert api.poll(5000) is False
    core.join()


def test_tcp_transport() -> None:
    def script(core: FakeCore) -> None:
        conn, _ = core.handshake()
        send = conn.expect(m.SendSync)
        conn.send(m.Response(send.trans_id, 0, b"", b"over tcp"))

    core = FakeCore(script, tcp=True)
    assert core.address.startswith("tcp://127.0.0.1:")
    with connect(core) as api:
        assert api.send_sync("/x", b"") == (b"", b"over tcp")
    core.join()


def test_bad_tcp_address() -> None:
    with pytest.raises(ValueError, match="tcp://HOST:PORT"):
        API(address="tcp://localhost", prefix="/p/")


def test_run_serves_every_thread_until_terminate() -> None:
    hellos: List[m.Hello] = []

    def script(core: FakeCore) -> None:
        conns = []
        for _ in range(3):
            conn, hello = core.handshake(thread_count=3)
            hellos.append(hello)
            subscribe_reply(conn)
            conns.append(conn)
        for n, conn in enumerate(conns):
            conn.send(request(tid(n), GET, b"%d" % n))
            assert conn.expect(m.Return).response == b"thread %d" % hellos[n].thread_index
            conn.send(m.Terminate(1000))
            conn.expect(m.Goodbye)

    def setup(api: API) -> None:
        api.subscribe("a/get", lambda api, req: b"thread %d" % api.thread_index)

    core = FakeCore(script)
    cumulo.run(setup, thread_count=3, address=core.address, prefix="/tests/")
    core.join()
    assert sorted(h.thread_index for h in hellos) == [0, 1, 2]


def test_run_raises_when_an_instance_fails() -> None:
    def script(core: FakeCore) -> None:
        conn = core.accept()
        conn.expect(m.Hello)
        conn.send(m.ErrorFrame(Status.SHUTTING_DOWN, "stopping"))

    core = FakeCore(script)
    with pytest.raises(CumuloError) as caught:
        cumulo.run(lambda api: None, thread_count=1, address=core.address, prefix="/tests/")
    assert caught.value.status is Status.SHUTTING_DOWN
    core.join()

