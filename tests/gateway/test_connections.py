"""Connection handling: keep-alive, pipelining, many clients at once, and a
slowloris client cut off by header_timeout_ms while others are served."""

from __future__ import annotations

import http.client
import select
import threading
import time

from conftest import HEADER_TIMEOUT_MS
from gateway_client import connect, read, read_response


def xml(n: int) -> bytes:
    return b"<http_test><value>%d</value></http_test>" % n


def test_keep_alive_reuses_one_connection(cloud):
    conn = http.client.HTTPConnection("127.0.0.1", cloud.port, timeout=5)
    try:
        remotes = set()
        for i in range(5):
            conn.request("GET", "/echo/ka?i=%d" % i)
            r = read(conn)
            assert r.status == 200
            remotes.add(r.header("remote_addr"))
        # echo shows the client address the gateway saw: one port, one
        # connection for all five requests.
        assert len(remotes) == 1, remotes
    finally:
        conn.close()


def test_pipelined_requests_are_answered_in_order(cloud):
    with connect(cloud.port) as s:
        s.sendall(
            b"GET /tests/http_req/rust.xml?value=1 HTTP/1.1\r\nHost: t\r\n\r\n"
            b"GET /tests/http_req/rust.xml?value=2 HTTP/1.1\r\nHost: t\r\n\r\n"
            b"GET /no/such HTTP/1.1\r\nHost: t\r\n\r\n"
        )
        with s.makefile("rb") as f:
            first, second, third = read_response(f), read_response(f), read_response(f)
    assert (first.status, first.body) == (200, xml(1))
    assert (second.status, second.body) == (200, xml(2))
    assert third.status == 404


def test_many_concurrent_connections(cloud):
    count = 500
    sockets = [connect(cloud.port) for _ in range(count)]
    try:
        for i, s in enumerate(sockets):
            s.sendall(b"GET /tests/http_req/rust.xml?value=%d HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n" % i)
        for i, s in enumerate(sockets):
            with s.makefile("rb") as f:
                r = read_response(f)
            assert (r.status, r.body) == (200, xml(i))
    finally:
        for s in sockets:
            s.close()


def test_a_client_that_shuts_down_its_sending_side_still_gets_its_answer(cloud):
    """Half-close: `printf 'GET ...' | nc -N` sends its request and then
    shuts down its side; the gateway answers and then closes."""
    import socket

    with connect(cloud.port) as s:
        s.sendall(b"GET /tests/http_req/rust.xml?value=7 HTTP/1.1\r\nHost: t\r\n\r\n")
        s.shutdown(socket.SHUT_WR)
        with s.makefile("rb") as f:
            r = read_response(f)
            assert (r.status, r.body) == (200, xml(7))
            s.settimeout(5)
            assert f.read() == b"", "closed after the answer"


def test_slowloris_is_cut_off_while_others_are_served(cloud):
    head = b"GET /tests/http_req/rust.xml?value=1 HTTP/1.1\r\nHost: t\r\nX-Padding: " + b"p" * 40 + b"\r\n\r\n"
    outcome = {}

    def trickle() -> None:
        s = connect(cloud.port)
        started = time.monotonic()
        try:
            for byte in head:
                s.sendall(bytes([byte]))
                readable, _, _ = select.select([s], [], [], 0.1)
                if readable:
                    outcome["got"] = s.recv(4096)  # b"": the gateway closed it
                    break
        except OSError as e:
            outcome["got"] = e  # reset by the gateway: cut off as well
        outcome["after"] = time.monotonic() - started
        s.close()

    slow = threading.Thread(target=trickle)
    slow.start()
    served = 0
    while slow.is_alive():
        conn = http.client.HTTPConnection("127.0.0.1", cloud.port, timeout=2)
        conn.request("GET", "/tests/http_req/rust.xml?value=5")
        r = read(conn)
        conn.close()
        assert (r.status, r.body) == (200, xml(5))
        served += 1
        time.sleep(0.05)
    slow.join()
    # The whole head would take len(head) * 0.1 s, far longer than the
    # header timeout: the gateway must close it first.
    assert len(head) * 0.1 > 4 * HEADER_TIMEOUT_MS / 1000
    assert HEADER_TIMEOUT_MS / 1000 - 0.1 <= outcome["after"] < HEADER_TIMEOUT_MS / 1000 + 1.0, outcome
    assert outcome["got"] == b"" or isinstance(outcome["got"], OSError), outcome
    assert served >= 3


def test_get_body_is_skipped_and_the_connection_goes_on(cloud):
    with connect(cloud.port) as s:
        s.sendall(
            b"GET /echo/x?a=1 HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello"
            b"GET /echo/y?b=2 HTTP/1.1\r\nHost: t\r\n\r\n"
        )
        with s.makefile("rb") as f:
            first, second = read_response(f), read_response(f)
    assert (first.status, first.body) == (200, b"a\x001\x00")
    assert (second.status, second.body) == (200, b"b\x002\x00")


def test_http_1_0(cloud):
    with connect(cloud.port) as s:
        s.sendall(b"GET /echo/v?x=1 HTTP/1.0\r\n\r\n")
        with s.makefile("rb") as f:
            r = read_response(f)
            assert f.read() == b""  # closed after the answer: no keep-alive asked
    assert (r.status, r.body) == (200, b"x\x001\x00")
    assert r.header("http_version") == "HTTP/1.0"


def test_an_idle_keep_alive_connection_is_closed_after_the_header_timeout(cloud):
    with connect(cloud.port) as s:
        started = None
        with s.makefile("rb") as f:
            for i in range(3):
                s.sendall(b"GET /tests/http_req/rust.xml?value=%d HTTP/1.1\r\nHost: t\r\n\r\n" % i)
                r = read_response(f)
                assert (r.status, r.body) == (200, xml(i))
                started = time.monotonic()
                time.sleep(HEADER_TIMEOUT_MS / 1000 / 2)  # idle for less than the timeout: kept
            # The idle time counts from the last answer, not from the first request.
            readable, _, _ = select.select([s], [], [], 5)
            assert readable
            try:
                assert s.recv(1) == b""
            except ConnectionResetError:
                pass
            idle = time.monotonic() - started
    assert HEADER_TIMEOUT_MS / 1000 - 0.1 <= idle < HEADER_TIMEOUT_MS / 1000 + 1.0, idle


def rss_kb(pid: int) -> int:
    with open("/proc/%d/status" % pid) as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


IDLE_CONNECTIONS = 2000
# What an idle keep-alive connection may cost the core, resident, once it has
# served a request (docs/GATEWAY.md, "Many idle connections"): measured
# about 4 KB; the bound leaves room for allocator and kernel noise.
MAX_KB_PER_IDLE_CONNECTION = 8


def test_idle_keep_alive_connections_cost_little_memory(built, tmp_path):
    import resource

    from conftest import Core, free_port

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < IDLE_CONNECTIONS + 200:
        raise AssertionError("ulimit -Hn is %d: the test needs %d descriptors" % (hard, IDLE_CONNECTIONS + 200))
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, IDLE_CONNECTIONS + 200), hard))
    port = free_port()
    core = Core(
        f"""
[core]
socket = "{tmp_path}/cumulo.sock"
# One shard: with two, the same load measures 8.9 KB per connection (4.8 KB
# with glibc's MALLOC_ARENA_MAX=1), a gap docs/GUARANTEES.md records.
threads = 1

[[service]]
prefix = "/"
internal = "http"
[service.settings]
port = {port}
max_connections = {IDLE_CONNECTIONS + 100}
header_timeout_ms = 120000

[[service]]
prefix = "/echo/"
internal = "echo"
""",
        tmp_path,
    )
    sockets = []
    try:
        core.wait_served(port, ["/echo/ready"])

        def open_and_use(n: int) -> None:
            for _ in range(n):
                s = connect(port)
                s.sendall(b"GET /echo/x?a=1 HTTP/1.1\r\nHost: t\r\n\r\n")
                sockets.append(s)
            for s in sockets[-n:]:
                data = b""
                while not data.endswith(b"a\x001\x00"):
                    chunk = s.recv(4096)
                    assert chunk, "closed before the answer"
                    data += chunk

        # A first batch warms the allocator and the core's tables up.
        open_and_use(200)
        time.sleep(0.5)
        before = rss_kb(core.proc.pid)
        open_and_use(IDLE_CONNECTIONS - 200)
        time.sleep(0.5)
        grown = rss_kb(core.proc.pid) - before
        per_connection = grown / (IDLE_CONNECTIONS - 200)
        print("core RSS: %d KB before, +%d KB for %d idle connections: %.1f KB each"
              % (before, grown, IDLE_CONNECTIONS - 200, per_connection))
        assert per_connection <= MAX_KB_PER_IDLE_CONNECTION, per_connection
        # Every connection is still open and served.
        for s in sockets[::97]:
            s.sendall(b"GET /echo/y?b=2 HTTP/1.1\r\nHost: t\r\n\r\n")
            assert b"b\x002\x00" in s.recv(4096)
    finally:
        for s in sockets:
            s.close()
        core.stop()
