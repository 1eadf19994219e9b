"""error_detail: what a 5xx body tells the client. Shown on a loopback
listener (test_mapping.py checks it), hidden by default on any other: the
body says the HTTP reason and a request id, the core's log says the rest
under the same id."""

from __future__ import annotations

import re
import time

import pytest

from conftest import THREADS, Core, free_port, python_service
from gateway_client import request

HIDDEN_BODY = re.compile(rb"^([a-z ]+) \(request id ([0-9a-f]{16})\)\n$")


@pytest.fixture(scope="module")
def gateways(built, tmp_path_factory):
    work = tmp_path_factory.mktemp("errors")
    ports = {"remote": free_port(), "hidden": free_port(), "public": free_port()}
    config = f"""
[core]
socket = "{work}/cumulo.sock"
threads = {THREADS}

# Not loopback: hidden unless asked.
[[service]]
prefix = "/remote/"
internal = "http"
[service.settings]
address = "0.0.0.0"
allow_remote = true
port = {ports["remote"]}
timeout_ms = 300

[[service]]
prefix = "/hidden/"
internal = "http"
[service.settings]
port = {ports["hidden"]}
error_detail = "hidden"

[[service]]
prefix = "/public/"
internal = "http"
[service.settings]
address = "0.0.0.0"
allow_remote = true
port = {ports["public"]}
error_detail = "public"

{python_service("/probe/")}
{python_service("/slow/")}
"""
    core = Core(config, work)
    try:
        for port in ports.values():
            core.wait_served(port, ["/probe/sleep?ms=0", "/slow/sleep?ms=0"])
        yield core, ports
    finally:
        core.stop()


def logged(core: Core, request_id: str) -> str:
    """The core's log line with `request_id` (written as the answer goes)."""
    deadline = time.monotonic() + 3
    while True:
        lines = [line for line in core.log().splitlines() if request_id in line]
        if lines:
            assert len(lines) == 1, lines
            return lines[0]
        assert time.monotonic() < deadline, core.log()
        time.sleep(0.05)


def hidden(body: bytes, reason: bytes) -> str:
    m = HIDDEN_BODY.match(body)
    assert m, body
    assert m.group(1) == reason, body
    return m.group(2).decode()


def test_a_handlers_exception_is_hidden_off_loopback_and_logged(gateways):
    core, ports = gateways
    r = request(ports["remote"], "GET", "/probe/fail")
    assert r.status == 500
    assert b"RuntimeError" not in r.body and b"fails" not in r.body
    request_id = hidden(r.body, b"internal server error")
    line = logged(core, request_id)
    assert "500" in line and "RuntimeError" in line and "this handler always fails" in line, line


def test_a_timeout_does_not_name_the_shard_off_loopback(gateways):
    core, ports = gateways
    r = request(ports["remote"], "GET", "/slow/sleep?ms=1500")
    assert r.status == 504
    assert b"shard" not in r.body and b"/slow/" not in r.body
    request_id = hidden(r.body, b"gateway timeout")
    assert "no response within 300 ms" in logged(core, request_id)


def test_ids_differ_from_one_answer_to_the_next(gateways):
    _, ports = gateways
    ids = {hidden(request(ports["remote"], "GET", "/probe/bad-info").body, b"bad gateway") for _ in range(5)}
    assert len(ids) == 5


def test_hidden_can_be_asked_for_on_loopback(gateways):
    core, ports = gateways
    r = request(ports["hidden"], "GET", "/probe/fail")
    assert r.status == 500
    assert "this handler always fails" in logged(core, hidden(r.body, b"internal server error"))


def test_public_can_be_asked_for_off_loopback(gateways):
    core, ports = gateways
    r = request(ports["public"], "GET", "/probe/fail")
    assert r.status == 500
    m = re.search(rb"this handler always fails \(request id ([0-9a-f]{16})\)\n$", r.body)
    assert m, r.body
    assert m.group(1).decode() not in core.log()


def test_a_4xx_answer_says_what_the_client_got_wrong_either_way(gateways):
    _, ports = gateways
    r = request(ports["remote"], "GET", "/no/such/thing")
    assert r.status == 404
    assert b"no service for '/no/such/thing/get'" in r.body
