"""How HTTP requests become service requests and answers become HTTP
responses (docs/GATEWAY.md, "Mapping")."""

from __future__ import annotations

import re

from gateway_client import connect, read_response, request


def kv(data: bytes) -> list:
    """Parse the key/value encoding (PROTOCOL.md 5) into (str, str) pairs."""
    fields = data.split(b"\0")
    assert fields[-1] == b"", data
    fields = fields[:-1]
    return [(fields[i].decode(), fields[i + 1].decode()) for i in range(0, len(fields), 2)]


def test_get_query_reaches_the_rust_service_as_key_value(cloud):
    r = request(cloud.port, "GET", "/tests/http_req/rust.xml?value=42")
    assert r.status == 200
    assert r.body == b"<http_test><value>42</value></http_test>"
    assert r.header("content-type") == "text/xml; charset=utf-8"


def test_get_without_value_is_the_services_error_answer(cloud):
    r = request(cloud.port, "GET", "/tests/http_req/rust.xml")
    assert r.status == 200
    assert r.body == b"<http_test><error>no value specified</error></http_test>"


def test_query_is_url_decoded_in_order(cloud):
    r = request(cloud.port, "GET", "/echo/q?a=1&b=x%20y+z&a=2&flag")
    assert r.status == 200
    assert r.body == b"a\x001\x00b\x00x y z\x00a\x002\x00flag\x00\x00"


def test_post_body_goes_to_the_service_as_is(cloud):
    body = b"\x00binary\xffpayload" * 100
    r = request(cloud.port, "POST", "/echo/upload", body=body, headers={"Content-Type": "application/octet-stream"})
    assert r.status == 200
    assert r.body == body


def test_request_info_has_headers_and_gateway_keys(cloud):
    # echo answers with its request_info as response_info: every pair comes
    # back as a response header.
    headers = {"X-Custom": "abc", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    r = request(cloud.port, "PUT", "/echo/item/7?x=1", body=b"v", headers=headers)
    assert r.status == 200
    assert r.header("x-custom") == "abc"
    assert r.header("traceparent") == headers["traceparent"]
    assert r.header("method") == "PUT"
    assert r.header("path") == "/echo/item/7"
    assert r.header("query") == "x=1"
    assert r.header("http_version") == "HTTP/1.1"
    host, port = r.header("remote_addr").rsplit(":", 1)
    assert host == "127.0.0.1" and int(port) > 0


def test_client_cannot_spoof_gateway_keys(cloud):
    r = request(cloud.port, "GET", "/echo/x", headers={"remote_addr": "10.9.9.9:1"})
    assert r.all("remote_addr") == [r.header("remote_addr")]
    assert not r.header("remote_addr").startswith("10.9.9.9")


GATEWAY_KEYS = ["method", "path", "query", "remote_addr", "http_version"]


def test_a_services_request_info_is_exactly_the_http_request(cloud):
    # GET and HEAD alike: the headers the client sent (a header named like
    # a key the core uses among files, too) and the gateway's keys; nothing
    # the core adds for its own services.
    for method in ("GET", "HEAD"):
        r = request(cloud.port, method, "/probe/info?x=1", headers={"X-Custom": "abc", "Cumulo-Stream": "client-said"})
        assert r.status == 200, r
        keys = r.header("x-info-keys").split(",")
        assert keys == ["host", "accept-encoding", "x-custom", "cumulo-stream"] + GATEWAY_KEYS, (method, keys)
        if method == "GET":
            assert dict(kv(r.body))["cumulo-stream"] == "client-said"
        r = request(cloud.port, method, "/probe/info")
        assert r.header("x-info-keys").split(",") == ["host", "accept-encoding"] + GATEWAY_KEYS, (method, r)


def test_status_and_headers_from_response_info(cloud):
    r = request(cloud.port, "GET", "/probe/created")
    assert r.status == 201
    assert r.header("content-type") == "application/json"
    assert r.all("x-answer") == ["yes", "again"]
    assert r.body == b'{"created": true}'


def test_no_content_type_unless_the_service_sets_one(cloud):
    r = request(cloud.port, "POST", "/echo/plain", body=b"x")
    assert r.header("content-type") is None


def test_unknown_name_is_404_naming_the_service(cloud):
    r = request(cloud.port, "GET", "/no/such/thing?value=1")
    assert r.status == 404
    assert r.header("content-type") == "text/plain; charset=utf-8"
    assert b"'/no/such/thing/get'" in r.body
    assert b"no service" in r.body


def test_method_is_part_of_the_name(cloud):
    # http_req subscribes rust.xml/get only: another method of that path is
    # 405, naming the methods that are served.
    r = request(cloud.port, "DELETE", "/tests/http_req/rust.xml?value=1")
    assert (r.status, r.header("allow")) == (405, "GET"), r
    assert b"rust.xml/delete" in r.body


def test_wrong_method_is_405_listing_the_subscribed_methods(cloud):
    # probe subscribes info/get and info/head. Each request on a connection
    # of its own: with two shards, both gateways answer some (the
    # subscriptions of an instance on the other shard are mirrored).
    for _ in range(10):
        r = request(cloud.port, "PUT", "/probe/info", body=b"x")
        assert r.status == 405, r
        assert r.header("allow") == "GET, HEAD"
        assert b"no service for '/probe/info/put'" in r.body
    r = request(cloud.port, "PATCH", "/tests/http_req/rust.xml", body=b"x")
    assert (r.status, r.header("allow")) == (405, "GET"), r


def test_a_path_no_method_is_served_for_stays_404(cloud):
    for method in ("GET", "PUT", "DELETE"):
        r = request(cloud.port, method, "/probe/not-subscribed", body=b"x" if method == "PUT" else None)
        assert (r.status, r.header("allow")) == (404, None), (method, r)


def test_failing_handler_is_500(cloud):
    # On loopback the body tells what happened, and carries a request id.
    r = request(cloud.port, "GET", "/probe/fail")
    assert r.status == 500
    assert b"this handler always fails" in r.body
    assert re.search(rb"\(request id [0-9a-f]{16}\)\n$", r.body), r.body


def test_malformed_response_info_is_502(cloud):
    r = request(cloud.port, "GET", "/probe/bad-info")
    assert r.status == 502
    assert b"malformed response_info" in r.body


def test_crashed_service_is_502(cloud):
    r = request(cloud.port, "GET", "/crashy/crash")
    assert r.status == 502
    assert b"went away" in r.body


def test_second_gateway_settings(cloud):
    # method_suffix = false, name_prefix = "/echo", query_format = "raw",
    # headers = ["x-keep"]: only that header reaches the service.
    r = request(cloud.small_port, "GET", "/anything?a=%20&b", headers={"X-Keep": "1", "X-Drop": "2"})
    assert r.status == 200
    assert r.body == b"a=%20&b"
    assert r.header("x-keep") == "1"
    assert r.header("x-drop") is None
    assert r.header("path") == "/anything"


def test_keepalive_off_closes_after_each_response(cloud):
    with connect(cloud.small_port) as s:
        s.sendall(b"GET /one HTTP/1.1\r\nHost: t\r\n\r\n")
        with s.makefile("rb") as f:
            r = read_response(f)
            assert f.read() == b""  # the gateway closed the connection
    assert r.status == 200
    assert r.header("connection") == "close"
