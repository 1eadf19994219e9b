"""A service that restarts is not a 404: requests for the names its prefix
covers wait for its new process (within the gateway's timeout), and a
service given up after too many crashes answers 503 with Retry-After at
once. A name no configured service covers stays a 404."""

from __future__ import annotations

import time

import pytest

from conftest import THREADS, Core, free_port, python_service
from gateway_client import request


@pytest.fixture(scope="module")
def gateway(built, tmp_path_factory):
    work = tmp_path_factory.mktemp("unavailable")
    port = free_port()
    restarts = "restart_delay = 300\nmax_r = 5\nmax_t = 60"
    config = f"""
[core]
socket = "{work}/cumulo.sock"
threads = {THREADS}

[[service]]
prefix = "/"
internal = "http"
[service.settings]
port = {port}

{python_service("/probe/", restarts)}

# A program that exits at once and may not restart: given up.
[[service]]
prefix = "/gone/"
path = "false"
max_r = 0
"""
    core = Core(config, work)
    try:
        core.wait_served(port, ["/probe/sleep?ms=0"])
        yield core, port
    finally:
        core.stop()


def test_requests_during_a_restart_wait_for_the_new_process(gateway):
    core, port = gateway
    assert request(port, "GET", "/probe/crash").status == 502
    # The process is down for its 300 ms restart delay and its start: every
    # request meanwhile waits and is answered by the new process.
    statuses = []
    end = time.monotonic() + 1.5
    while time.monotonic() < end:
        statuses.append(request(port, "GET", "/probe/sleep?ms=0", timeout=10).status)
    assert statuses and set(statuses) == {200}, statuses
    assert "restarting process 0" in core.log()


def test_a_given_up_service_is_503_with_retry_after_at_once(gateway):
    _, port = gateway
    started = time.monotonic()
    r = request(port, "GET", "/gone/x")
    assert time.monotonic() - started < 1.0
    assert r.status == 503, r
    assert r.header("retry-after") == "1", r
    assert b"given up" in r.body, r.body


def test_a_name_no_configured_service_covers_stays_404(gateway):
    _, port = gateway
    assert request(port, "GET", "/nobody/x").status == 404
