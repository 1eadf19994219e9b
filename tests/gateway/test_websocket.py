"""WebSocket in the HTTP gateway, end to end: the real `cumulo` binary, the
`websockets` client, raw sockets where the bytes on the wire matter, and
Python services that push to the connections' names."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import resource
import socket
import struct
import time
import urllib.parse
from pathlib import Path
from typing import Iterator

import pytest
import websockets
from websockets.exceptions import ConnectionClosed, InvalidStatus

from conftest import THREADS, Core, free_port
from gateway_client import request

WSPROBE = Path(__file__).resolve().parent / "services" / "wsprobe.py"
LIMIT = 64 * 1024  # max_message, max_frame and max_pending of /live/


def probe(prefix: str, count: int = 1) -> str:
    import sys

    return f"""
[[service]]
prefix = "{prefix}"
path = "{sys.executable}"
args = ["{WSPROBE}"]
count_process = {count}
env = {{ PYTHONUNBUFFERED = "1", CUMULO_PURE_PYTHON = "1" }}
"""


class Ws:
    def __init__(self, core: Core, port: int, admin: int) -> None:
        self.core, self.port, self.admin = core, port, admin

    def url(self, path: str) -> str:
        return "ws://127.0.0.1:%d%s" % (self.port, path)

    def get(self, path: str):
        r = request(self.port, "GET", path)
        assert r.status == 200, r
        return r.body

    def events(self) -> list:
        return json.loads(self.get("/wsprobe/events"))

    def push(self, name: str, body: str) -> bytes:
        return request(self.port, "GET", "/wsprobe/push?" + urllib.parse.urlencode({"name": name, "body": body})).body

    def mcast(self, name: str, body: str) -> dict:
        return json.loads(self.get("/wsprobe/mcast?" + urllib.parse.urlencode({"name": name, "body": body})))

    def admin_call(self, method: str, path: str):
        r = request(self.admin, method, path)
        return r.status, json.loads(r.body) if r.body.startswith((b"{", b"[")) else r.body

    def rss_kb(self) -> int:
        for line in Path("/proc/%d/status" % self.core.proc.pid).read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def ws(built: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ws]:
    work = tmp_path_factory.mktemp("websocket")
    port, admin = free_port(), free_port()
    config = f"""
[core]
socket = "{work}/cumulo.sock"
threads = {THREADS}
[admin]
port = {admin}

[[service]]
prefix = "/"
internal = "http"
# The gateway's own send rules hold for its WebSocket calls too.
dest_list_deny = ["/secret/*"]
[service.settings]
port = {port}
timeout_ms = 3000

[[service.settings.websocket]]
path = "/live/"
request_name = "/echo/in"
connect_name = "/wsprobe/connected"
disconnect_name = "/wsprobe/disconnected"
subscriptions = ["/rooms/{{room}}"]
max_message = {LIMIT}
max_frame = {LIMIT}
max_pending = {LIMIT}

[[service.settings.websocket]]
path = "/calls/"
request_name = "/wscall/call"
protocol = "id"
max_in_flight = 64

[[service.settings.websocket]]
path = "/denied/"
request_name = "/secret/in"
protocol = "id"

# Behind a resiliency policy: one of its two instances fails every call.
[[service.settings.websocket]]
path = "/flaky/"
request_name = "/wsflaky/in"
protocol = "id"

[[service.settings.websocket]]
path = "/solo/"
unique = true
max_connections = 3
request_name = "/echo/in"

[[service.settings.websocket]]
path = "/fan/"
request_name = "/echo/in"

[[service.settings.websocket]]
path = "/idle/"
idle_timeout_ms = 500
ping_ms = 0

[[service.settings.websocket]]
path = "/pinged/"
ping_ms = 150

[[service]]
prefix = "/echo/"
internal = "echo"

[[service]]
prefix = "/secret/"
internal = "echo"

[[service]]
prefix = "/wsflaky/"
internal = "chaos"
settings = {{ fail = 1.0 }}

[[service]]
prefix = "/wsflaky/"
internal = "chaos"
settings = {{ fail = 0.0 }}

[[policy]]
name = "wsflaky"
destinations = ["/wsflaky/*"]
[policy.retry]
max_retries = 2
interval_ms = 5
on = ["SERVICE_ERROR", "NO_SERVICE"]
{probe("/wsprobe/")}
{probe("/wscall/", 4)}
"""
    core = Core(config, work)
    try:
        core.wait_served(port, ["/echo/ready", "/wsprobe/events"])
        core.wait_served(port, ["/wscall/events"])
        yield Ws(core, port, admin)
    finally:
        core.stop()


def run(coro):
    return asyncio.run(coro)


def test_echo_text_and_binary_through_a_service(ws: Ws) -> None:
    async def go():
        async with websockets.connect(ws.url("/live/a")) as c:
            assert (await c.recv()).startswith("welcome ")  # the connect answer comes first
            await c.send("hello")
            assert await c.recv() == "hello"
            await c.send(b"\x00\xffbin")
            assert await c.recv() == b"\x00\xffbin"
            await c.send("é" * 1000)
            assert await c.recv() == "é" * 1000

    run(go())


def test_upgrade_is_off_where_not_configured(ws: Ws) -> None:
    async def go():
        with pytest.raises(InvalidStatus) as e:
            async with websockets.connect(ws.url("/elsewhere/x")):
                pass
        # served as the plain GET it also is: no service has that name
        assert e.value.response.status_code == 404

    run(go())


def test_pushes_reach_the_connection_by_name(ws: Ws) -> None:
    async def go():
        async with websockets.connect(ws.url("/live/push-me")) as c:
            await c.recv()  # welcome
            result = await asyncio.to_thread(ws.push, "/live/push-me/websocket", "from a service")
            assert result == b"OK"
            assert await c.recv() == "from a service"
        # once closed, its name is gone
        for _ in range(50):
            r = await asyncio.to_thread(ws.push, "/live/push-me/websocket", "x")
            if b"NO_SERVICE" in r:
                break
            await asyncio.sleep(0.05)
        assert b"NO_SERVICE" in r

    run(go())


def test_subscriptions_from_the_url_address_a_group(ws: Ws) -> None:
    async def go():
        async with websockets.connect(ws.url("/live/u1?room=blue")) as a, websockets.connect(
            ws.url("/live/u2?room=blue")
        ) as b, websockets.connect(ws.url("/live/u3?room=red")) as c:
            for x in (a, b, c):
                await x.recv()
            got = await asyncio.to_thread(ws.mcast, "/rooms/blue", "to blue")
            assert got == {"copies": 2, "ok": 2}
            assert await a.recv() == "to blue" and await b.recv() == "to blue"
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(c.recv(), 0.3)

    run(go())


def test_mcast_fans_out_to_a_thousand_connections(ws: Ws) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(soft, 4096), hard), hard))

    async def go():
        conns = await asyncio.gather(*[websockets.connect(ws.url("/fan/room")) for _ in range(1000)])
        try:
            started = time.monotonic()
            got = await asyncio.to_thread(ws.mcast, "/fan/room/websocket", "tick")
            assert got == {"copies": 1000, "ok": 1000}
            answers = await asyncio.gather(*[asyncio.wait_for(c.recv(), 10) for c in conns])
            assert answers == ["tick"] * 1000
            print("fan-out to 1000 connections: %.0f ms" % ((time.monotonic() - started) * 1000))
            # the plain gateway kept serving meanwhile
            assert (await asyncio.to_thread(request, ws.port, "GET", "/echo/plain")).status == 200
        finally:
            await asyncio.gather(*[c.close() for c in conns])

    run(go())


def test_request_ids_many_calls_in_flight(ws: Ws) -> None:
    async def go():
        async with websockets.connect(ws.url("/calls/x")) as c:
            started = time.monotonic()
            for i in range(16):
                await c.send(json.dumps({"id": i, "echo": "m%d" % i, "ms": 300}))
            await c.send(json.dumps({"id": "s", "echo": "quick"}))
            answers = {}
            while len(answers) < 17:
                a = json.loads(await asyncio.wait_for(c.recv(), 10))
                answers[a["id"]] = a
            elapsed = time.monotonic() - started
            for i in range(16):
                assert answers[i]["status"] == "OK"
                assert answers[i]["response"]["echo"] == "m%d" % i
                assert answers[i]["response"]["seen_id"] == str(i)
            # 4 processes x 300 ms each: in flight together, not one by one (4.8 s)
            assert elapsed < 3.0, elapsed
            assert len({a["response"]["pid"] for a in answers.values()}) > 1
            # a message without an id is refused with a clear error; the socket stays
            await c.send("not json")
            bad = json.loads(await c.recv())
            assert bad["id"] is None and bad["status"] == "BAD_MESSAGE" and "JSON" in bad["error"]
            await c.send(json.dumps({"id": 99, "echo": "still open"}))
            assert json.loads(await c.recv())["response"]["echo"] == "still open"

    run(go())


def test_errors_of_calls_come_back_with_their_id(ws: Ws) -> None:
    async def go():
        async with websockets.connect(ws.url("/calls/y")) as c:
            # /wscall/call answers; a request the service fails on is SERVICE_ERROR
            await c.send(json.dumps({"id": "e", "ms": "not a number"}))
            a = json.loads(await c.recv())
            assert a["id"] == "e" and a["status"] == "SERVICE_ERROR" and a["error"]

    run(go())


def test_calls_are_held_to_the_gateways_send_rules(ws: Ws) -> None:
    async def go():
        async with websockets.connect(ws.url("/denied/x")) as c:
            await c.send(json.dumps({"id": "s"}))
            a = json.loads(await c.recv())
            assert a["id"] == "s" and a["status"] == "UNAUTHORIZED", a
            assert "may not send to '/secret/in'" in a["error"], a
            # The connection stays open; allowed paths are served as before.
            await c.send(json.dumps({"id": "t"}))
            assert json.loads(await c.recv())["status"] == "UNAUTHORIZED"
        async with websockets.connect(ws.url("/live/still")) as c:
            assert (await c.recv()).startswith("welcome ")
            await c.send("allowed")
            assert await c.recv() == "allowed"

    run(go())


def test_calls_are_retried_by_the_policy_of_their_name(ws: Ws) -> None:
    async def go():
        async with websockets.connect(ws.url("/flaky/x")) as c:
            for i in range(50):
                await c.send(json.dumps({"id": str(i), "body": "b"}))
                a = json.loads(await c.recv())
                assert a["id"] == str(i) and a["status"] == "OK", a

    run(go())


def test_connect_and_disconnect_notifications_with_reasons(ws: Ws) -> None:
    async def go():
        c = await websockets.connect(ws.url("/live/notified?room=green"))
        welcome = await c.recv()
        conn_id = welcome.split()[1]
        await c.close()
        big = await websockets.connect(ws.url("/live/big"), max_size=None)
        big_id = (await big.recv()).split()[1]
        await big.send("x" * (LIMIT + 1))
        with pytest.raises(ConnectionClosed) as e:
            await big.recv()
        assert e.value.rcvd.code == 1009
        return conn_id, big_id

    conn_id, big_id = run(go())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        events = ws.events()
        mine = [e for e in events if e["id"] in (conn_id, big_id)]
        if len([e for e in mine if e["event"] == "disconnect"]) == 2:
            break
        time.sleep(0.05)
    connect = next(e for e in mine if e["event"] == "connect" and e["id"] == conn_id)
    assert connect["name"] == "/live/notified/websocket" and connect["query"] == "room=green"
    reasons = {e["id"]: e["reason"] for e in mine if e["event"] == "disconnect"}
    assert reasons == {conn_id: "client", big_id: "too_large"}


def handshake(port: int, path: str) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall(
        (
            "GET %s HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % (path, key)
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    assert head.startswith(b"HTTP/1.1 101"), head
    return s


def read_frame(f) -> tuple[int, bytes]:
    """One server frame (unmasked) from a socket's file: opcode, payload."""
    head = f.read(2)
    assert len(head) == 2, "the gateway closed the connection"
    b0, b1 = head
    n = b1 & 0x7F
    if n == 126:
        n = struct.unpack(">H", f.read(2))[0]
    elif n == 127:
        n = struct.unpack(">Q", f.read(8))[0]
    return b0 & 0x0F, f.read(n)


def read_close_code(s: socket.socket) -> int:
    """Reads server frames up to the close frame; its status code."""
    f = s.makefile("rb")
    while True:
        opcode, payload = read_frame(f)
        if opcode == 0x8:
            return struct.unpack(">H", payload[:2])[0]


def test_bad_frames_are_closed_with_1002(ws: Ws) -> None:
    s = handshake(ws.port, "/fan/raw")
    s.sendall(b"\x81\x05hello")  # a client frame without a mask
    assert read_close_code(s) == 1002
    s.close()
    s = handshake(ws.port, "/fan/raw")
    s.sendall(b"\xf1\x80\x00\x00\x00\x00")  # reserved bits set
    assert read_close_code(s) == 1002
    s.close()
    # and the gateway serves on
    assert request(ws.port, "GET", "/echo/after-bad-frames").status == 200


def test_bad_handshakes_are_refused(ws: Ws) -> None:
    for extra, status in [
        ("Sec-WebSocket-Version: 8\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n", b"426"),
        ("Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: short\r\n", b"400"),
    ]:
        s = socket.create_connection(("127.0.0.1", ws.port), timeout=5)
        s.sendall(("GET /live/x HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n%s\r\n" % extra).encode())
        assert s.recv(100).split(b" ")[1] == status
        s.close()
    r = request(ws.port, "GET", "/live/x?room=*", headers={
        "Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
    assert r.status == 400 and b"room" in r.body


def test_too_many_connections_are_refused_and_unique_replaces(ws: Ws) -> None:
    async def go():
        a = await websockets.connect(ws.url("/solo/a"))
        b = await websockets.connect(ws.url("/solo/b"))
        c = await websockets.connect(ws.url("/solo/c"))
        with pytest.raises(InvalidStatus) as e:
            await websockets.connect(ws.url("/solo/d"))
        assert e.value.response.status_code == 503
        await c.close()
        await asyncio.sleep(0.2)
        # unique: a second /solo/a takes the name, the first is closed
        a2 = await websockets.connect(ws.url("/solo/a"))
        with pytest.raises(ConnectionClosed) as e:
            await asyncio.wait_for(a.recv(), 5)
        assert e.value.rcvd.code == 1000 and "newer" in e.value.rcvd.reason
        assert await asyncio.to_thread(ws.push, "/solo/a/websocket", "to the newest") == b"OK"
        assert await asyncio.wait_for(a2.recv(), 5) == "to the newest"
        await a2.close()
        await b.close()

    run(go())


def test_idle_connections_are_closed(ws: Ws) -> None:
    async def go():
        async with websockets.connect(ws.url("/idle/x"), ping_interval=None) as c:
            with pytest.raises(ConnectionClosed) as e:
                await asyncio.wait_for(c.recv(), 5)
            assert e.value.rcvd.code == 1001

    run(go())


def test_the_gateway_pings_every_ping_ms(ws: Ws) -> None:
    # A raw client, to see the pings (websockets answers them unseen).
    with handshake(ws.port, "/pinged/x") as s:
        f = s.makefile("rb")
        start = time.monotonic()
        pings = []
        while len(pings) < 3:
            opcode, _ = read_frame(f)
            if opcode == 0x9:
                pings.append(time.monotonic() - start)
        # Three pings, about 150 ms apart (not sooner, not much later).
        assert 0.4 <= pings[2] < 2.0, pings


def test_slow_reader_is_cut_off_without_growing_memory(ws: Ws) -> None:
    s = handshake(ws.port, "/live/slow")
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)

    def listed() -> list:
        status, listing = ws.admin_call("GET", "/v1/websockets")
        assert status == 200, listing
        return [c["url"] for p in listing["paths"] for c in p["connections"]]

    assert "/live/slow" in listed()
    before = ws.rss_kb()
    # 4000 x 16 KiB = 64 MiB pushed at a browser that reads nothing
    r = json.loads(ws.get("/wsprobe/flood?" + urllib.parse.urlencode(
        {"name": "/live/slow/websocket", "n": 4000, "size": 16384})))
    assert r["error"] is not None and ("QUEUE_FULL" in r["error"] or "NO_SERVICE" in r["error"]), r
    assert r["sent"] < 1000, r
    grown = ws.rss_kb() - before
    assert grown < 32 * 1024, "the core grew by %d KiB" % grown
    # The connection is gone from the gateway's table. (Reading to EOF
    # would prove it too, but through a 4 KB receive window the socket
    # buffers' megabytes trickle in for a minute and a half.)
    deadline = time.monotonic() + 10
    while "/live/slow" in listed():
        assert time.monotonic() < deadline, "the slow reader is still listed"
        time.sleep(0.05)
    s.close()
    assert request(ws.port, "GET", "/echo/after-slow").status == 200


def test_admin_lists_and_closes_connections_and_counts(ws: Ws) -> None:
    async def go():
        async with websockets.connect(ws.url("/live/admin-me")) as c:
            await c.recv()
            await c.send("abc")
            await c.recv()
            status, listing = await asyncio.to_thread(ws.admin_call, "GET", "/v1/websockets")
            assert status == 200
            live = next(p for p in listing["paths"] if p["path"] == "/live/")
            mine = next(x for x in live["connections"] if x["url"] == "/live/admin-me")
            assert mine["name"] == "/live/admin-me/websocket" and mine["bytes_in"] == 3
            assert mine["bytes_out"] >= 3 and mine["age_seconds"] >= 0 and live["count"] >= 1
            status, body = await asyncio.to_thread(ws.admin_call, "DELETE", "/v1/websockets/%d" % mine["id"])
            assert status == 202, body
            with pytest.raises(ConnectionClosed) as e:
                await asyncio.wait_for(c.recv(), 5)
            assert e.value.rcvd.code == 1000
        status, body = await asyncio.to_thread(ws.admin_call, "DELETE", "/v1/websockets/999999")
        assert status == 404 and body["code"] == "not_found"

    run(go())
    metrics = request(ws.admin, "GET", "/metrics").body.decode()
    for name in ("cumulo_websocket_connections", "cumulo_websocket_opened_total", "cumulo_websocket_messages_in_total",
                 'cumulo_websocket_closed_total{reason="admin"}', 'cumulo_websocket_closed_total{reason="too_large"}'):
        assert name in metrics, name
    assert 'cumulo_websocket_closed_total{reason="admin"} 0' not in metrics
