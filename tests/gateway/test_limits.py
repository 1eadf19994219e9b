"""Timeouts, overload and size limits: every request ends in a response,
and the gateway keeps serving after each refusal."""

from __future__ import annotations

import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from conftest import BODY_TIMEOUT_MS, MAX_BODY, MAX_HEADER_SIZE, SMALL_MAX_CONNECTIONS, TIMEOUT_MS
from gateway_client import connect, raw_exchange, request


def still_serving(port: int) -> None:
    r = request(port, "GET", "/tests/http_req/rust.xml?value=7")
    assert (r.status, r.body) == (200, b"<http_test><value>7</value></http_test>")


def test_slow_service_is_504_after_timeout_ms(cloud):
    started = time.monotonic()
    r = request(cloud.port, "GET", "/timeout/sleep?ms=%d" % (TIMEOUT_MS + 700))
    elapsed = time.monotonic() - started
    assert r.status == 504
    assert b"'/timeout/sleep/get'" in r.body
    assert TIMEOUT_MS / 1000 - 0.05 <= elapsed < TIMEOUT_MS / 1000 + 0.5
    still_serving(cloud.port)


def test_full_queue_is_503(cloud):
    # /slow/ has queue_limit = 1 and one instance taking one request at a
    # time: of 6 concurrent requests, one runs, one waits, the rest are
    # refused at once.
    with ThreadPoolExecutor(6) as pool:
        replies = list(pool.map(lambda _: request(cloud.port, "GET", "/slow/sleep?ms=400"), range(6)))
    statuses = sorted(r.status for r in replies)
    assert statuses.count(503) >= 2, statuses
    assert 200 in statuses, statuses
    assert set(statuses) <= {200, 503, 504}, statuses
    refused = next(r for r in replies if r.status == 503)
    assert b"overloaded" in refused.body
    still_serving(cloud.port)


def test_body_over_max_body_is_413_from_content_length(cloud):
    head = b"POST /echo/big HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % (MAX_BODY * 100)
    r = raw_exchange(cloud.port, head)  # refused before any body byte is sent
    assert r.status == 413
    assert b"max_body" in r.body
    still_serving(cloud.port)


def test_chunked_body_over_max_body_is_413(cloud):
    chunk = b"x" * 8192
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(MAX_BODY // len(chunk) + 2)) + b"0\r\n\r\n"
    head = b"POST /echo/big HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
    assert raw_exchange(cloud.port, head + body).status == 413
    still_serving(cloud.port)


def test_body_at_max_body_is_accepted(cloud):
    body = b"y" * MAX_BODY
    r = request(cloud.port, "POST", "/echo/exact", body=body)
    assert (r.status, len(r.body)) == (200, MAX_BODY)


def test_malformed_request_is_400(cloud):
    assert raw_exchange(cloud.port, b"THIS IS NOT HTTP\r\n\r\n").status == 400
    assert raw_exchange(cloud.port, b"GET /x HTTP/1.1\r\nbad header line\r\n\r\n").status == 400
    still_serving(cloud.port)


def test_encoded_nul_in_query_is_400(cloud):
    r = request(cloud.port, "GET", "/echo/x?a=%00")
    assert r.status == 400
    assert b"NUL" in r.body


def test_oversized_headers_are_431(cloud):
    head = b"GET /echo/x HTTP/1.1\r\nHost: t\r\nX-Big: " + b"z" * (MAX_HEADER_SIZE + 1024) + b"\r\n\r\n"
    assert raw_exchange(cloud.port, head).status == 431
    still_serving(cloud.port)


def test_path_too_long_for_a_service_name_is_414(cloud):
    # A service name is at most 65535 bytes on the wire; hyper's URI limit
    # is just under it.
    head = b"GET /echo/" + b"a" * 66000 + b" HTTP/1.1\r\nHost: t\r\n\r\n"  # under max_header_size
    assert raw_exchange(cloud.port, head).status == 414
    still_serving(cloud.port)


def test_connections_over_max_connections_are_refused(cloud):
    held = [connect(cloud.small_port) for _ in range(SMALL_MAX_CONNECTIONS)]
    try:
        time.sleep(0.2)  # let the gateway accept them
        with connect(cloud.small_port) as extra:
            extra.sendall(b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n")
            data = b""
            try:
                while chunk := extra.recv(4096):
                    data += chunk
            except ConnectionResetError:
                pass
        assert data == b"" or data.startswith(b"HTTP/1.1 503"), data
    finally:
        for s in held:
            s.close()
    # Once the held connections are gone, new ones are served again.
    deadline = time.monotonic() + 3
    while True:
        try:
            if request(cloud.small_port, "GET", "/x").status == 200:
                break
        except OSError:
            pass
        assert time.monotonic() < deadline, "the small gateway did not recover"
        time.sleep(0.05)


def test_body_that_never_arrives_is_408_after_body_timeout_ms(cloud):
    head = b"POST /echo/stalled HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n"
    started = time.monotonic()
    r = raw_exchange(cloud.port, head + b"only ten b")
    elapsed = time.monotonic() - started
    assert r.status == 408
    assert b"body_timeout_ms" in r.body
    assert r.header("connection") == "close"
    assert BODY_TIMEOUT_MS / 1000 - 0.1 <= elapsed < BODY_TIMEOUT_MS / 1000 + 2
    still_serving(cloud.port)


def _drain(s: socket.socket) -> bytes:
    """Reads until the gateway closes the connection (or resets it)."""
    data = b""
    try:
        while chunk := s.recv(65536):
            data += chunk
    except OSError:
        pass
    return data


def _attack(port: int, kind: str) -> bytes:
    """One abusive connection; returns what the gateway answered."""
    with connect(port, timeout=15) as s:
        try:
            if kind == "garbage":
                s.sendall(b"\x00\xff NOT HTTP AT ALL \r\n\r\n")
            elif kind == "huge head":
                s.sendall(b"GET /echo/x HTTP/1.1\r\nX-Big: " + b"z" * (MAX_HEADER_SIZE + 1024) + b"\r\n\r\n")
            elif kind == "huge body":
                s.sendall(b"POST /echo/x HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % (MAX_BODY * 10))
            elif kind == "stalled body":
                s.sendall(b"POST /echo/x HTTP/1.1\r\nHost: t\r\nContent-Length: 50\r\n\r\nabc")
            elif kind == "slowloris":
                for byte in b"GET /echo/x HTTP/1.1\r\nHost: t\r\nX-Slow: 1234567890\r\n\r\n":
                    try:
                        s.sendall(bytes([byte]))
                    except OSError:
                        break  # cut off by the header timeout
                    time.sleep(0.1)
        except OSError:
            pass  # the gateway answered and closed before all was sent
        return _drain(s)


def test_attacks_do_not_stop_a_well_behaved_client(cloud):
    """Garbage, oversized heads and bodies, a stalled body and a slowloris
    head, over and over on other connections, while one client's requests
    are each answered correctly within 2 s. Each attack ends in an HTTP
    error or the gateway closing the connection, within its timeouts."""
    kinds = ["garbage", "huge head", "huge body", "stalled body", "slowloris"]
    # What each attack may get: its error status, or (when the gateway cut
    # it off, or reset it with bytes unread) nothing.
    expected = {"garbage": b"HTTP/1.1 400", "huge head": b"HTTP/1.1 431", "huge body": b"HTTP/1.1 413",
                "stalled body": b"HTTP/1.1 408", "slowloris": None}
    stop = threading.Event()
    outcomes: list = []

    def attacker(kind: str) -> None:
        while not stop.is_set():
            started = time.monotonic()
            answer = _attack(cloud.port, kind)
            outcomes.append((kind, answer[:12], time.monotonic() - started))

    threads = [threading.Thread(target=attacker, args=(k,)) for k in kinds]
    for t in threads:
        t.start()
    try:
        time.sleep(0.3)  # let every attack get going
        for i in range(40):
            started = time.monotonic()
            r = request(cloud.port, "GET", "/tests/http_req/rust.xml?value=%d" % i, timeout=5)
            assert (r.status, r.body) == (200, b"<http_test><value>%d</value></http_test>" % i)
            assert time.monotonic() - started < 2.0
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=20)
    assert not any(t.is_alive() for t in threads), "an attack connection was never ended by the gateway"
    for kind in kinds:
        mine = [o for o in outcomes if o[0] == kind]
        assert mine, kind
        for _, answer, took in mine:
            if kind in ("slowloris", "huge head"):
                assert answer == b"" or (expected[kind] and answer.startswith(expected[kind])), (kind, answer)
            else:
                assert answer.startswith(expected[kind]), (kind, answer)
            assert took < 10, (kind, took)


def test_content_length_hyper_takes_as_too_large_is_413(cloud):
    # The two largest 64-bit lengths: hyper itself would answer 431.
    for n in (18446744073709551615, 18446744073709551614, MAX_BODY + 1):
        head = b"POST /echo/big HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % n
        r = raw_exchange(cloud.port, head)
        assert r.status == 413, (n, r)
        assert b"max_body" in r.body
        assert r.header("connection") == "close"
    still_serving(cloud.port)


def test_chunk_size_over_max_body_is_413_at_once(cloud):
    head = b"POST /echo/big HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
    for chunks in (b"ffffffffffffffff\r\n", b"%x\r\n" % (MAX_BODY + 1), b"10\r\n0123456789abcdef\r\n%x\r\n" % MAX_BODY):
        started = time.monotonic()
        r = raw_exchange(cloud.port, head + chunks)  # the chunk's data never comes
        elapsed = time.monotonic() - started
        assert r.status == 413, (chunks, r)
        assert b"max_body" in r.body
        assert elapsed < BODY_TIMEOUT_MS / 1000 / 2, (chunks, elapsed)
    still_serving(cloud.port)


def test_http11_without_host_or_with_two_is_400(cloud):
    for head in (
        b"GET /echo/x HTTP/1.1\r\n\r\n",
        b"GET /echo/x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        b"GET /echo/x HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n",
        b"POST /echo/x HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi",
    ):
        r = raw_exchange(cloud.port, head)
        assert r.status == 400, (head, r)
        assert b"Host" in r.body
    # HTTP/1.0 needs no Host; one Host is the norm
    assert raw_exchange(cloud.port, b"GET /echo/x?a=1 HTTP/1.0\r\n\r\n").status == 200
    assert raw_exchange(cloud.port, b"GET /echo/x?a=1 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").status == 200
    still_serving(cloud.port)
