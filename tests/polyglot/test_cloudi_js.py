"""Services written against CloudI's own JavaScript API (npm ``cloudi``
2.0.6), run unchanged with ``protocol = "cloudi"`` (docs/CLOUDI.md):
send_sync, send_async + recv_async (oldest first), forward, mcast_async
(copies per subscription, sender excluded), a sender never its own
destination, timeouts, termination, and CloudI's ``http_req`` under steady
load (the API handles one message per socket read: the core must never
coalesce or interleave keep-alives)."""

from __future__ import annotations

import os
import shutil
import threading
import time

import pytest

import cumulo
from conftest import EXAMPLES, NO_VALUE, PYTHON, SERVICES, XML_INFO, Core, _absolute, start_core, value_xml
from test_cloudi import _zombie, call

JS = "/tests/cloudi_js/"
HTTP_REQ_JS = "/tests/http_req/javascript_cloudi.xml/get"
HTTP_REQ_NATIVE = "/tests/http_req/python.xml/get"
NODE_MODULES = EXAMPLES / "http_req" / "javascript_cloudi" / "node_modules"

pytestmark = pytest.mark.skipif(not (NODE_MODULES / "cloudi").is_dir() or not shutil.which("node"),
                                reason="CloudI's JavaScript API is not installed (scripts/setup.sh)")


@pytest.fixture(scope="module")
def core() -> Core:
    services = [
        {"prefix": JS, "path": "node", "args": [str(SERVICES / "cloudi_service.js")], "protocol": "cloudi",
         "env": {"NODE_PATH": str(NODE_MODULES)}, "count_process": 3, "count_thread": 1, "timeout_terminate": 3000},
        {"prefix": "/tests/http_req/", "path": "node", "args": [_absolute("http_req/javascript_cloudi/http_req.js")],
         "dir": str(EXAMPLES), "protocol": "cloudi", "count_process": 1, "count_thread": 1},
        {"prefix": "/tests/http_req/", "path": str(PYTHON), "args": [_absolute("http_req/python/http_req.py")],
         "dir": str(EXAMPLES), "count_process": 1, "count_thread": 1},
        {"prefix": "/echo/", "internal": "echo"},
    ]
    c = start_core(services)
    try:
        c.wait_ready([HTTP_REQ_JS, HTTP_REQ_NATIVE, JS + "member"])
    except BaseException:
        c.stop()
        raise
    yield c
    c.assert_stopped_cleanly()
    for pid, prefix in c.started():
        assert not os.path.exists(f"/proc/{pid}") or _zombie(pid), f"{prefix} process {pid} still running"
    log = c.log_text()
    forced = [line for line in log.splitlines() if "after TERMINATE: SIGTERM" in line or "killed by signal" in line]
    assert not forced, "\n".join(forced)
    assert log.count("terminated") >= 4, log[-3000:]
    shutil.rmtree(c.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def api(core):
    with core.api() as a:
        yield a


@pytest.mark.parametrize("body,expected", [(b"value\x0042\x00", value_xml(42)), (b"value\x00-7\x00", value_xml(-7)),
                                           (b"value\x00x\x00", NO_VALUE), (b"value\x0042", NO_VALUE)])
def test_http_req(api, body, expected):
    assert api.send_sync(HTTP_REQ_JS, body) == (XML_INFO, expected)


@pytest.mark.parametrize("target,body,expected", [
    (HTTP_REQ_NATIVE, b"value\x005\x00", value_xml(5)),   # a native SDK service
    ("/echo/x", b"hello", b"hello"),                        # a native internal service
    (HTTP_REQ_JS, b"value\x006\x00", value_xml(6)),         # CloudI to CloudI
])
def test_send_sync_to_others(api, target, body, expected):
    assert api.send_sync(JS + "send_sync", call(target, body))[1] == expected


def test_send_async_and_recv_async(api):
    assert api.send_sync(JS + "send_async", call(HTTP_REQ_NATIVE, b"value\x009\x00"))[1] == value_xml(9)


def test_send_sync_times_out(api):
    t0 = time.monotonic()
    assert api.send_sync(JS + "send_sync", call("/nobody/here", timeout=300))[1] == b"timeout"
    assert 0.25 <= time.monotonic() - t0 < 5


def test_forward(api):
    assert api.send_sync(JS + "forward", call(HTTP_REQ_NATIVE, b"value\x0011\x00")) == (XML_INFO, value_xml(11))


def test_a_sender_is_never_its_own_destination(api):
    _, response = api.send_sync(JS + "self_send", b"20", timeout=30_000)
    me, others, mine, timeouts = response.split(b":")
    assert (others, mine, timeouts) == (b"20", b"0", b"0"), response


def test_mcast_one_copy_per_subscription_without_the_sender(api):
    _, response = api.send_sync(JS + "mcast_to", b"triple", timeout=15_000)
    me, copies, answers = response.split(b":")
    assert copies == b"6"
    assert answers.split(b",") == sorted(sorted({b"0", b"1", b"2"} - {me}) * 3)


def test_mcast_best_matching_pattern_only(api):
    seen = set()
    for _ in range(12):
        _, response = api.send_sync(JS + "mcast_to", b"best/x", timeout=15_000)
        me, copies, answers = response.split(b":")
        seen.add(me)
        assert (copies, answers) == ((b"0", b"") if me == b"0" else (b"1", b"0")), response
    assert len(seen) > 1, "every request went to the same process"


def test_recv_async_without_trans_id_takes_the_oldest(api):
    assert api.send_sync(JS + "oldest", b"", timeout=15_000)[1] == b"delay-400,delay-0"


def test_http_req_does_not_stall_under_steady_load(core):
    """CloudI's JavaScript API handles one message per socket read: a
    keep-alive coalesced with a request used to leave it one message behind,
    answering nothing until the next keep-alive (5 s). 4 clients for 12 s
    (two keep-alive rounds): every request answered, in every second."""
    seconds, clients = 12, 4
    answered = [0] * seconds
    failures: list[str] = []
    t0 = time.monotonic()

    def client():
        with core.api() as a:
            while (elapsed := time.monotonic() - t0) < seconds:
                try:
                    _, body = a.send_sync(HTTP_REQ_JS, b"value\x001\x00", timeout=2000)
                    assert body == value_xml(1)
                    answered[int(elapsed)] += 1
                except cumulo.CumuloError as e:
                    failures.append(f"{elapsed:.1f}s: {e}")

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[:5]
    assert all(n > 0 for n in answered), answered
    assert sum(answered) > 500, answered
