"""Services written against CloudI's own APIs (PyPI and crates.io ``cloudi``
2.0.7), run unchanged with ``protocol = "cloudi"`` (docs/CLOUDI.md): calls in
both directions with native services, timeouts, the null response,
mcast_async with recv_async, CloudI's routing rules (sender excluded, mcast
copies per subscription of the best pattern, oldest-first recv_async),
termination, a protocol error (process killed and restarted), and a peer that
writes garbage. CloudI's JavaScript API: test_cloudi_js.py."""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
import urllib.request

import pytest

import cumulo
from conftest import (EXAMPLES, NO_VALUE, PYTHON, SERVICES, XML_INFO, Core, _absolute, start_core,
                      value_xml)

CLOUDI = "/tests/cloudi/"
CLOUDI_RUST = "/tests/cloudi_rust/"
RAW = "/tests/cloudi_raw/{}/"
HTTP_REQ_NATIVE = "/tests/http_req/python.xml/get"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(name: str, body: bytes = b"", timeout: int = 5000) -> bytes:
    """The request of the test service's send_sync, send_async and forward."""
    return b"%s\n%d\n%s" % (name.encode(), timeout, body)


def http_req(lang: str) -> dict:
    return {"prefix": "/tests/http_req/", "path": str(PYTHON), "args": [_absolute(f"http_req/{lang}/http_req.py")],
            "dir": str(EXAMPLES), "count_process": 1, "count_thread": 1}


@pytest.fixture(scope="module")
def ports():
    return {"http": free_port(), "admin": free_port()}


@pytest.fixture(scope="module")
def core(ports) -> Core:
    services = [
        {"prefix": CLOUDI, "path": str(PYTHON), "args": [str(SERVICES / "cloudi_service.py")], "protocol": "cloudi",
         "count_process": 1, "count_thread": 3, "timeout_terminate": 3000,
         # Its send rules (docs/SECURITY.md): /secret/ is served, but not to it.
         "dest_list_deny": ["/secret/*"]},
        {"prefix": "/secret/", "internal": "echo"},
        {"prefix": CLOUDI_RUST, "path": str(EXAMPLES.parent / "target" / "release" / "polyglot_cloudi_service"),
         "protocol": "cloudi", "count_process": 1, "count_thread": 3, "timeout_terminate": 3000},
        http_req("python"),
        {**http_req("python_cloudi"), "protocol": "cloudi", "count_thread": 2},
        {"prefix": "/tests/http_req/", "path": str(EXAMPLES.parent / "target" / "release" / "http_req_cloudi"),
         "protocol": "cloudi", "count_process": 1, "count_thread": 2},
        {"prefix": "/echo/", "internal": "echo"},
        {"prefix": "/", "internal": "http", "settings": {"port": ports["http"]}},
    ]
    c = start_core(services, admin_port=ports["admin"])
    try:
        c.wait_ready([HTTP_REQ_NATIVE, "/tests/http_req/python_cloudi.xml/get", "/tests/http_req/rust_cloudi.xml/get",
                      CLOUDI + "member", CLOUDI_RUST + "whoami"])
    except BaseException:
        c.stop()
        raise
    yield c
    c.assert_stopped_cleanly()
    # CloudI-protocol processes have no CUMULO_SOCKET to be found by: check
    # each one the core started is gone, and that it left on TERM (exit 0).
    for pid, prefix in c.started():
        assert not os.path.exists(f"/proc/{pid}") or _zombie(pid), f"{prefix} process {pid} still running"
    log = c.log_text()
    assert "terminated" in log, log[-3000:]
    forced = [line for line in log.splitlines() if ("after TERMINATE: SIGTERM" in line or "killed by signal" in line)
              and "cloudi_raw" not in line and "cloudi_crash" not in line]
    assert not forced, "\n".join(forced)
    shutil.rmtree(c.dir, ignore_errors=True)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@pytest.fixture(scope="module")
def api(core):
    with core.api() as a:
        yield a


@pytest.mark.parametrize("lang", ["python_cloudi", "rust_cloudi"])
@pytest.mark.parametrize("body,expected", [(b"value\x0042\x00", value_xml(42)), (b"value\x00-7\x00", value_xml(-7)),
                                           (b"value\x00x\x00", NO_VALUE), (b"value\x0042", NO_VALUE)])
def test_http_req_through_the_core(api, lang, body, expected):
    assert api.send_sync(f"/tests/http_req/{lang}.xml/get", body) == (XML_INFO, expected)


@pytest.mark.parametrize("lang", ["python_cloudi", "rust_cloudi"])
def test_http_req_through_the_gateway(core, ports, lang):
    url = f"http://127.0.0.1:{ports['http']}/tests/http_req/{lang}.xml?value=42"
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.status == 200
        assert r.headers["content-type"] == "text/xml; charset=utf-8"
        assert r.read() == value_xml(42)


def test_native_to_cloudi_sees_name_pattern_info_priority(api):
    info, body = api.send_sync(CLOUDI + "echo/a/b", b"req", request_info=b"k\0v\0", priority=-3)
    assert info == b"k\0v\0"
    assert body == b"/tests/cloudi/echo/a/b|/tests/cloudi/echo/*|req|-3"


@pytest.mark.parametrize("target,body,expected", [
    (HTTP_REQ_NATIVE, b"value\x005\x00", value_xml(5)),   # a native SDK service
    ("/echo/x", b"hello", b"hello"),                        # a native internal service
    ("/tests/http_req/rust_cloudi.xml/get", b"value\x006\x00", value_xml(6)),  # CloudI to CloudI
])
def test_cloudi_send_sync_to_others(api, target, body, expected):
    _, response = api.send_sync(CLOUDI + "send_sync", call(target, body))
    assert response == expected


def test_a_cloudi_sender_is_held_to_its_dest_list_deny(api, ports):
    def denied() -> int:
        with urllib.request.urlopen(f"http://127.0.0.1:{ports['admin']}/metrics", timeout=10) as r:
            line = next(l for l in r.read().decode().splitlines() if l.startswith("cumulo_denied_total "))
        return int(line.split()[1])

    before = denied()
    for kind in ("send_sync", "send_async"):
        t = time.monotonic()
        _, response = api.send_sync(CLOUDI + kind, call("/secret/x", b"hi", timeout=5000), timeout=10_000)
        # CloudI has no error statuses: a refused send is the null trans_id
        # (the service answers "timeout"), at once rather than at 5 s.
        assert response == b"timeout", (kind, response)
        assert time.monotonic() - t < 2.5, kind
    # A refused forward is answered to the original sender: UNAUTHORIZED.
    with pytest.raises(cumulo.CumuloError) as refused:
        api.send_sync(CLOUDI + "forward", call("/secret/x", b"hi"), timeout=10_000)
    assert refused.value.status == cumulo.Status.UNAUTHORIZED, refused.value
    assert denied() >= before + 3
    # A sender without rules (this native client) is served there.
    assert api.send_sync("/secret/x", b"hi")[1] == b"hi"
    # And the CloudI service still sends to what its rules allow.
    assert api.send_sync(CLOUDI + "send_sync", call("/echo/x", b"hello"))[1] == b"hello"


def test_cloudi_send_async_and_recv_async(api):
    _, response = api.send_sync(CLOUDI + "send_async", call(HTTP_REQ_NATIVE, b"value\x009\x00"))
    assert response == value_xml(9)


def test_send_async_responses_are_kept_until_their_request_deadline(api):
    # As in CloudI: an answer not collected with recv_async is dropped once
    # its request's timeout has passed (so a service that never collects
    # does not make the core grow).
    _, response = api.send_sync(CLOUDI + "expire", call(HTTP_REQ_NATIVE, b"value\x009\x00", timeout=300))
    assert response == b"gone|" + value_xml(9)


def test_cloudi_send_sync_times_out_with_the_null_trans_id(api):
    # No subscriber: like CloudI, the send waits for one until its timeout.
    t0 = time.monotonic()
    _, response = api.send_sync(CLOUDI + "send_sync", call("/nobody/here", timeout=300))
    assert response == b"timeout"
    assert 0.25 <= time.monotonic() - t0 < 5


def test_cloudi_recv_async_times_out(api):
    _, response = api.send_sync(CLOUDI + "send_async", call("/nobody/here", timeout=200))
    assert response == b"timeout"


def test_native_send_sync_to_a_slow_cloudi_service_times_out(api):
    with pytest.raises(cumulo.CumuloError) as e:
        api.send_sync(CLOUDI + "sleep", b"1500", timeout=300)
    assert e.value.status == cumulo.Status.TIMEOUT
    time.sleep(1.5)  # let it finish before the next test uses that thread


def test_null_response_is_a_timeout_at_once(api):
    t0 = time.monotonic()
    with pytest.raises(cumulo.CumuloError) as e:
        api.send_sync(CLOUDI + "null", b"", timeout=5000)
    assert e.value.status == cumulo.Status.TIMEOUT
    assert "null response" in e.value.message
    assert time.monotonic() - t0 < 2


def test_mcast_async_with_recv_async(api):
    # The three threads subscribe "member": as in CloudI the mcasting thread
    # gets no copy of its own (N - 1 answers, none timing out).
    _, response = api.send_sync(CLOUDI + "mcast", b"x", timeout=15_000)
    count, answers, left = response.split(b":")
    assert count == b"2"
    assert sorted(answers.split(b",")) == [b"member-x", b"member-x"]
    assert left == b"empty"


def test_native_mcast_reaches_every_cloudi_thread(api):
    tids = api.mcast_async(CLOUDI + "member", b"y")
    assert len(tids) == 3
    answers = sorted(api.recv_async(t, timeout=10_000).response for t in tids)
    assert answers == [b"member-y"] * 3


# CloudI's routing rules for CloudI senders (docs/CLOUDI.md, "Routing as in
# CloudI"), with CloudI's Python and Rust APIs.
BOTH_APIS = pytest.mark.parametrize("prefix", [CLOUDI, CLOUDI_RUST], ids=["python", "rust"])


@BOTH_APIS
def test_a_cloudi_sender_is_never_its_own_destination(api, prefix):
    # 3 threads subscribe whoami; 20 send_sync from one of them: every one
    # answered by another thread, none held by the sender until its timeout.
    _, response = api.send_sync(prefix + "self_send", b"20", timeout=30_000)
    me, others, mine, timeouts = response.split(b":")
    assert (others, mine, timeouts) == (b"20", b"0", b"0"), response


@BOTH_APIS
def test_cloudi_mcast_one_copy_per_subscription_without_the_sender(api, prefix):
    # Each thread subscribes "triple" 3 times: 2 other threads x 3 copies.
    _, response = api.send_sync(prefix + "mcast_to", b"triple", timeout=15_000)
    me, copies, answers = response.split(b":")
    others = sorted({b"0", b"1", b"2"} - {me})
    assert copies == b"6"
    assert answers.split(b",") == sorted(others * 3)


@BOTH_APIS
def test_cloudi_mcast_goes_to_the_best_matching_pattern_only(api, prefix):
    # Thread 0 subscribes best/x, every thread best/*: best/x's group only,
    # which from thread 0 itself is nobody.
    seen = set()
    for _ in range(12):
        _, response = api.send_sync(prefix + "mcast_to", b"best/x", timeout=15_000)
        me, copies, answers = response.split(b":")
        seen.add(me)
        assert (copies, answers) == ((b"0", b"") if me == b"0" else (b"1", b"0")), response
    assert len(seen) > 1, "every request went to the same thread"


@BOTH_APIS
def test_native_mcast_keeps_native_rules(api, prefix):
    # A native sender: one copy per instance, over every matching pattern.
    for name, expected in [("triple", [b"0", b"1", b"2"]), ("best/x", [b"0", b"star-1", b"star-2"])]:
        tids = api.mcast_async(prefix + name, b"")
        assert sorted(api.recv_async(t, timeout=10_000).response for t in tids) == expected


@BOTH_APIS
def test_recv_async_without_trans_id_takes_the_oldest(api, prefix):
    # send_async(slow), send_async(fast), both answered: recv_async() hands
    # out the slow one first, as CloudI's recv_async_select_oldest.
    _, response = api.send_sync(prefix + "oldest", b"", timeout=15_000)
    assert response == b"delay-400,delay-0"


def test_forward(api):
    info, response = api.send_sync(CLOUDI + "forward", call(HTTP_REQ_NATIVE, b"value\x0011\x00"))
    assert (info, response) == (XML_INFO, value_xml(11))


def test_subscribe_count(api):
    assert api.send_sync(CLOUDI + "count", b"")[1] == b"1"


def _admin(ports, method: str, path: str, body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{ports['admin']}{path}", data=data, method=method,
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read() or b"{}")


def _wait_for(what, predicate, timeout=15):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


@pytest.mark.parametrize("mode", ["garbage", "wrong_tuple", "huge_length"])
def test_malformed_terms_close_that_connection_only(core, api, ports, mode):
    prefix = RAW.format(mode)
    added = _admin(ports, "POST", "/v1/services", {
        "prefix": prefix, "path": str(PYTHON), "args": [str(SERVICES / "cloudi_raw.py")], "protocol": "cloudi",
        "env": {"RAW_MODE": mode}, "max_r": 1, "timeout_terminate": 100})
    sid = added["ids"][0]
    try:
        # The connection is closed and, as in CloudI, the process killed.
        _wait_for(f"{mode}: the raw peer was not killed\n{core.log_tail()}",
                  lambda: prefix in core.log_text() and "killing CloudI API process"
                  in core.log_text().split(prefix, 1)[1])
        log = core.log_text()
        assert "protocol error" in log and prefix in log, core.log_tail()
        # Everyone else is still served.
        assert api.send_sync("/tests/http_req/python_cloudi.xml/get", b"value\x001\x00")[1] == value_xml(1)
        assert api.send_sync(HTTP_REQ_NATIVE, b"value\x002\x00")[1] == value_xml(2)
    finally:
        _admin(ports, "DELETE", f"/v1/services/{sid}")


def test_protocol_error_kills_the_process_and_it_is_restarted(core, api, ports):
    prefix = "/tests/cloudi_crash/"
    added = _admin(ports, "POST", "/v1/services", {
        "prefix": prefix, "path": str(PYTHON), "args": [str(SERVICES / "cloudi_service.py")], "protocol": "cloudi",
        "count_thread": 1, "max_r": 5, "restart_delay": 100})
    sid = added["ids"][0]
    try:
        assert api.send_sync(prefix + "member", b"a", timeout=20_000, wait_for_service=True)[1] == b"member-a"
        (pid,) = [p["pid"] for p in _admin(ports, "GET", f"/v1/services/{sid}")["processes"]]
        with pytest.raises(cumulo.CumuloError):
            api.send_sync(prefix + "protocol_error", b"", timeout=5000)
        _wait_for(f"process {pid} still running", lambda: not os.path.exists(f"/proc/{pid}") or _zombie(pid))
        assert f"killing CloudI API process {pid}" in core.log_text(), core.log_tail()
        # Restarted: a new process serves the service again.
        assert api.send_sync(prefix + "member", b"b", timeout=20_000, wait_for_service=True)[1] == b"member-b"
        (new_pid,) = [p["pid"] for p in _admin(ports, "GET", f"/v1/services/{sid}")["processes"]]
        assert new_pid != pid
    finally:
        _admin(ports, "DELETE", f"/v1/services/{sid}")


def test_removal_terminates_the_process_cleanly(core, api, ports):
    prefix = "/tests/cloudi_removed/"
    added = _admin(ports, "POST", "/v1/services", {
        "prefix": prefix, "path": str(PYTHON), "args": [str(SERVICES / "cloudi_service.py")], "protocol": "cloudi",
        "count_thread": 2})
    sid = added["ids"][0]
    assert api.send_sync(prefix + "member", b"z", timeout=20_000, wait_for_service=True)[1] == b"member-z"
    pids = [p["pid"] for p in _admin(ports, "GET", f"/v1/services/{sid}")["processes"]]
    t0 = time.monotonic()
    _admin(ports, "DELETE", f"/v1/services/{sid}")
    assert time.monotonic() - t0 < 2.5, "the process did not leave on TERM within timeout_terminate"
    for pid in pids:
        _wait_for(f"process {pid} still running", lambda: not os.path.exists(f"/proc/{pid}") or _zombie(pid))
    tail = core.log_text().split(f"service={prefix}", 1)[1]
    assert "exited with code 0" in tail, core.log_tail()
    with pytest.raises(cumulo.CumuloError) as e:
        api.send_sync(prefix + "member", b"z", timeout=2000)
    assert e.value.status == cumulo.Status.NO_SERVICE
