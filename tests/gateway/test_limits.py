"""Timeouts, overload and size limits: every request ends in a response,
and the gateway keeps serving after each refusal."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from conftest import MAX_BODY, MAX_HEADER_SIZE, SMALL_MAX_CONNECTIONS, TIMEOUT_MS
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
