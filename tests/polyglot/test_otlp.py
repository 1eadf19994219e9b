"""The core's spans, received by a fake OTLP/HTTP collector (otlp_collector.py,
the opentelemetry-proto definitions): one request through the gateway, a
Python service, a Go service and a service on a second node is one trace with
every parent link; a timed-out call's span says TIMEOUT; a request through the
queue service is delivered, after the core was killed and started again, as a
child of its producer's span; and an exporter whose collector is gone or slow
delays no request, drops what it cannot hold and counts it (docs/TRACING.md)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

import cumulo
from conftest import FAULTY, _toml, faulty_services, start_core
from otlp_collector import Collector

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
STATE = "congo=t61rcWkgMzE"


def traceparent(trace: str, span: str = CLIENT_SPAN) -> str:
    return f"00-{trace}-{span}-01"


def traced(trace: str) -> bytes:
    return cumulo.info_encode([(b"traceparent", traceparent(trace).encode())])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tracing(collector_endpoint: str, name: str, **more) -> str:
    keys = {"endpoint": collector_endpoint, "batch_delay_ms": 50, "service_name": name, **more}
    return "[tracing]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in keys.items())


def cluster(nats: str, node: str) -> str:
    return f'[cluster]\nnode = "{node}"\nname = "otlp"\nservers = ["{nats}"]\nheartbeat_ms = 100\n'


def nats_server_bin() -> str:
    for candidate in (os.environ.get("NATS_SERVER"), shutil.which("nats-server"), "/usr/sbin/nats-server"):
        if candidate and os.path.exists(candidate):
            return candidate
    pytest.fail("nats-server is not installed (bash scripts/setup.sh installs it)")


@pytest.fixture(scope="module")
def collector():
    c = Collector().start()
    yield c
    c.stop()


@pytest.fixture(scope="module")
def nats():
    port = free_port()
    proc = subprocess.Popen([nats_server_bin(), "-a", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
        assert time.monotonic() < deadline, "nats-server did not listen"
        time.sleep(0.05)
    yield f"nats://127.0.0.1:{port}"
    proc.terminate()
    proc.wait()


def stopped(*cores) -> None:
    for c in cores:
        c.stop()
        shutil.rmtree(c.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def cloud(built, collector, nats):
    """Node a: the gateway, Python's faulty service calling Go's, Go's calling
    /far/echo, which node b serves; a chaos service that never answers."""
    b = start_core([{"prefix": "/far/", "internal": "echo"}], core_keys={"node_id": 2},
                   sections=tracing(collector.endpoint, "node-b") + cluster(nats, "b"))
    faulty = {svc["prefix"]: svc for svc in faulty_services(built)}
    python, go = dict(faulty[FAULTY.format("python")]), dict(faulty[FAULTY.format("go")])
    python["env"] = {"FAULTY_TRACE_TARGET": FAULTY.format("go") + "trace_sync"}
    go["env"] = {"FAULTY_TRACE_TARGET": "/far/echo"}
    port = free_port()
    services = [python, go, {"prefix": "/", "internal": "http", "settings": {"port": port, "traceresponse": True, "method_suffix": False}},
                {"prefix": "/dropped/", "internal": "chaos", "settings": {"drop": 1.0}}]
    a = start_core(services, core_keys={"node_id": 1},
                   sections=tracing(collector.endpoint, "node-a", start_traces=True) + cluster(nats, "a"))
    try:
        a.wait_ready([FAULTY.format("python") + "ok", FAULTY.format("go") + "ok"])
        with a.api() as api:  # node b's echo is known to node a
            deadline = time.monotonic() + 10
            while True:
                try:
                    api.send_sync("/far/echo", b"", timeout=1000)
                    break
                except cumulo.CumuloError:
                    assert time.monotonic() < deadline, f"/far/echo not reachable\n{a.log_tail()}"
                    time.sleep(0.05)
    except BaseException:
        stopped(a, b)
        raise
    yield a, port
    stopped(a, b)


def by_id(spans) -> dict:
    return {s.span_id: s for s in spans}


def test_one_request_through_the_gateway_python_go_and_another_node_is_one_trace(cloud, collector):
    a, port = cloud
    req = urllib.request.Request(f"http://127.0.0.1:{port}{FAULTY.format('python')}trace_sync",
                                 headers={"traceparent": traceparent(TRACE), "tracestate": STATE})
    with urllib.request.urlopen(req, timeout=20) as resp:
        assert resp.status == 200
        answered = resp.headers["traceresponse"]
    assert re.fullmatch(f"00-{TRACE}-[0-9a-f]{{16}}-01", answered), answered

    spans = collector.wait(lambda c: len(c.trace(TRACE)) >= 5 and c.trace(TRACE))
    if os.environ.get("CUMULO_TRACE_DUMP"):  # docs/tracing/waterfall.py draws docs/TRACING.md's picture from it
        Path(os.environ["CUMULO_TRACE_DUMP"]).write_text(json.dumps([vars(s) for s in spans], indent=1))
    named = {s.attrs.get("rpc.method"): s for s in spans if s.kind == "client" or s.service == "node-b"}
    server = next(s for s in spans if s.kind == "server" and s.service == "node-a")
    to_python = named[FAULTY.format("python") + "trace_sync"]
    to_go = named[FAULTY.format("go") + "trace_sync"]
    to_far = next(s for s in spans if s.kind == "client" and s.attrs.get("rpc.method") == "/far/echo")
    at_b = next(s for s in spans if s.service == "node-b")
    assert len(spans) == 5, spans

    # The client's span is the gateway's parent; the trace id is the client's.
    assert (server.parent_id, server.name) == (CLIENT_SPAN, f"GET {FAULTY.format('python')}trace_sync")
    assert answered == traceparent(TRACE, server.span_id), "traceresponse names the gateway's span"
    assert server.attrs["http.response.status_code"] == 200
    # Each hop is the child of the one before, across the SDKs and the nodes.
    assert to_python.parent_id == server.span_id
    assert to_go.parent_id == to_python.span_id, "Python's call inherits its request's context"
    assert to_far.parent_id == to_go.span_id, "Go's call inherits its request's context"
    assert (at_b.kind, at_b.parent_id, at_b.attrs["rpc.method"]) == ("server", to_far.span_id, "/far/echo")
    assert {s.attrs["rpc.system"] for s in spans} == {"cumulo"}
    assert (to_python.attrs["cumulo.node"], at_b.attrs["cumulo.node"]) == (1, 2)
    assert to_python.attrs["rpc.service"] == FAULTY.format("python") + "trace_sync", "the pattern it matched"
    for s in spans:
        assert s.error is None, s
        assert s.start_ns <= s.end_ns
    # The gateway's span holds the whole request; each call holds its child's.
    assert server.start_ns <= to_python.start_ns and to_python.end_ns <= server.end_ns
    assert to_python.start_ns <= to_go.start_ns and to_go.end_ns <= to_python.end_ns


@pytest.mark.parametrize("sent", [None, "00-not-a-trace-context-01"])
def test_the_gateway_starts_a_trace_for_a_request_without_a_valid_context(cloud, collector, sent):
    a, port = cloud
    headers = {"traceparent": sent} if sent else {}
    req = urllib.request.Request(f"http://127.0.0.1:{port}{FAULTY.format('python')}ok", headers=headers)
    with urllib.request.urlopen(req, timeout=20) as resp:
        assert resp.read() == b"ok"
        answered = resp.headers["traceresponse"]
    _, trace, gateway_span, flags = answered.split("-")
    assert flags == "01" and trace != TRACE
    spans = collector.wait(lambda c: len(c.trace(trace)) >= 2 and c.trace(trace))
    root = next(s for s in spans if s.kind == "server")
    call = next(s for s in spans if s.kind == "client")
    assert (root.span_id, root.parent_id) == (gateway_span, ""), "the gateway's span is the root"
    assert call.parent_id == gateway_span


def test_a_timed_out_calls_span_says_timeout(cloud, collector):
    a, _ = cloud
    trace = "5bf92f3577b34da6a3ce929d0e0e4736"
    with a.api() as api, pytest.raises(cumulo.CumuloError) as failed:
        api.send_sync("/dropped/x", b"", request_info=traced(trace), timeout=300)
    assert failed.value.status == cumulo.Status.TIMEOUT
    (span,) = collector.wait(lambda c: c.trace(trace))
    assert (span.kind, span.parent_id, span.attrs["cumulo.status"]) == ("client", CLIENT_SPAN, "TIMEOUT")
    assert span.error is not None and span.error.startswith("TIMEOUT"), span
    assert span.attrs["cumulo.timeout_ms"] == 300
    assert 0.25e9 <= span.end_ns - span.start_ns < 5e9


def test_a_request_never_traced_starts_a_trace_of_its_own_with_start_traces(cloud, collector):
    a, _ = cloud
    with a.api() as api:
        info, _ = api.send_sync("/far/echo", b"", request_info=b"k\x00v\x00", timeout=5000)
    pairs = dict(cumulo.info_parse(info))
    assert pairs[b"k"] == b"v"
    trace, parent = pairs[b"traceparent"].decode().split("-")[1:3]
    spans = collector.wait(lambda c: len(c.trace(trace)) >= 2 and c.trace(trace))
    root = next(s for s in spans if s.parent_id == "")
    assert (root.kind, root.service, root.attrs["rpc.method"]) == ("client", "node-a", "/far/echo")
    assert parent == next(s for s in spans if s.service == "node-b").span_id, "echo's parent is node b's span"


def test_a_queued_request_is_delivered_after_a_kill_as_its_producers_child(collector):
    trace = "6bf92f3577b34da6a3ce929d0e0e4736"
    home = Path(tempfile.mkdtemp(prefix="cumulo-otlp-", dir="/tmp"))
    queue = {"prefix": "/queue/", "internal": "queue",
             "settings": {"dir": str(home / "queue"), "mode": "accepted", "retry": 1000, "retry_delay_ms": 100}}
    sections = tracing(collector.endpoint, "node-q")
    first = start_core([queue], sections=sections, dir=home)
    try:
        with first.api() as api:
            api.send_sync("/queue/later/x", b"job", request_info=traced(trace), timeout=5000)
        stored = collector.wait(lambda c: [s for s in c.trace(trace) if s.attrs.get("rpc.method") == "/queue/later/x"])
        producer = stored[0]
        assert producer.parent_id == CLIENT_SPAN
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait()
        killed_at = time.time_ns()
        second = start_core([queue, {"prefix": "/later/", "internal": "echo"}], sections=sections, dir=home)
    except BaseException:
        stopped(first)
        raise
    try:
        def delivered(c):
            return [s for s in c.trace(trace) if s.attrs.get("rpc.method") == "/later/x"
                    and s.attrs["cumulo.status"] == "OK" and s.start_ns > killed_at]
        (span,) = collector.wait(delivered, timeout=20)
        assert (span.kind, span.parent_id) == ("client", producer.span_id), "the delivery is the producer's child"
    finally:
        stopped(second)


def rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+)", status)[1])


def metric(admin_port: int, name: str) -> int:
    text = urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/metrics", timeout=5).read().decode()
    return int(re.search(rf"^{name} (\d+)$", text, re.M)[1])


@pytest.mark.parametrize("collector_state", ["gone", "slow"])
def test_a_gone_or_slow_collector_delays_no_request_and_drops_what_it_cannot_hold(collector_state):
    slow = Collector(delay=3.0).start() if collector_state == "slow" else None
    endpoint = slow.endpoint if slow else f"http://127.0.0.1:{free_port()}/v1/traces"
    admin = free_port()
    core = start_core([{"prefix": "/echo/", "internal": "echo"}], admin_port=admin,
                      sections=tracing(endpoint, "node-x", max_queue_spans=64, max_batch=32, export_timeout_ms=10000))
    try:
        with core.api() as api:
            api.send_sync("/echo/warm", b"", request_info=traced(TRACE), timeout=5000)
            before = rss_kib(core.proc.pid)
            slowest = 0.0
            for i in range(3000):
                t0 = time.monotonic()
                api.send_sync("/echo/x", b"x" * 100, request_info=traced(TRACE), timeout=5000)
                slowest = max(slowest, time.monotonic() - t0)
            grown = rss_kib(core.proc.pid) - before
        # An export waits up to 3 s (slow) or fails at once (gone); no request waits for it.
        assert slowest < 1.0, f"a request took {slowest:.3f} s"
        assert metric(admin, "cumulo_trace_spans_recorded_total") >= 3001
        assert metric(admin, "cumulo_trace_spans_dropped_total") > 0
        if collector_state == "gone":  # after the exporter's own retries
            deadline = time.monotonic() + 15
            while metric(admin, "cumulo_trace_spans_failed_total") == 0:
                assert time.monotonic() < deadline, "no failed export counted"
                time.sleep(0.1)
        assert grown < 20_000, f"the core grew {grown} KiB holding spans it cannot send"
    finally:
        stopped(core)
        if slow:
            slow.stop()


def test_a_forwarded_requests_leg_is_a_child_of_the_request_it_forwards(cloud, collector):
    a, _ = cloud
    trace = "7bf92f3577b34da6a3ce929d0e0e4736"
    with a.api() as api:  # Python's trace_forward hands the request to Go's trace_sync
        api.send_sync(FAULTY.format("python") + "trace_forward", b"", request_info=traced(trace), timeout=10_000)
    spans = collector.wait(lambda c: len(c.trace(trace)) >= 4 and c.trace(trace))
    first = next(s for s in spans if s.attrs.get("cumulo.call") == "send_sync" and s.parent_id == CLIENT_SPAN)
    leg = next(s for s in spans if s.attrs.get("cumulo.call") == "forward")
    onward = next(s for s in spans if s.kind == "client" and s.attrs.get("rpc.method") == "/far/echo")
    assert first.attrs["rpc.method"] == FAULTY.format("python") + "trace_forward"
    assert (leg.parent_id, leg.attrs["rpc.method"]) == (first.span_id, FAULTY.format("go") + "trace_sync")
    assert onward.parent_id == leg.span_id, "Go's call is the forward's child"


def test_each_multicast_copy_and_each_retry_is_a_span_of_its_own(collector):
    trace_m, trace_r = "8bf92f3577b34da6a3ce929d0e0e4736", "9bf92f3577b34da6a3ce929d0e0e4736"
    policy = ('[[policy]]\nname = "again"\ndestinations = ["/flaky/*"]\n[policy.retry]\nmax_retries = 2\n'
              'interval_ms = 10\non = ["SERVICE_ERROR"]\n')
    core = start_core([{"prefix": "/m/", "internal": "echo", "count_process": 3},
                       {"prefix": "/flaky/", "internal": "chaos", "settings": {"fail": 1.0}}],
                      sections=tracing(collector.endpoint, "node-m") + policy)
    try:
        with core.api() as api:
            ids = api.mcast_async("/m/x", b"", request_info=traced(trace_m))
            assert len(ids) == 3
            for tid in ids:
                api.recv_async(tid, timeout=5000)
            with pytest.raises(cumulo.CumuloError) as failed:
                api.send_sync("/flaky/x", b"", request_info=traced(trace_r), timeout=5000)
            assert failed.value.status == cumulo.Status.SERVICE_ERROR
        copies = collector.wait(lambda c: len(c.trace(trace_m)) >= 3 and c.trace(trace_m))
        assert len(copies) == 3 and len({s.span_id for s in copies}) == 3
        assert {(s.kind, s.parent_id, s.attrs["cumulo.call"]) for s in copies} == {("client", CLIENT_SPAN, "mcast_async")}
        attempts = collector.wait(lambda c: len(c.trace(trace_r)) >= 3 and c.trace(trace_r))
        assert sorted(s.attrs["cumulo.attempt"] for s in attempts) == [0, 1, 2]
        assert {s.parent_id for s in attempts} == {CLIENT_SPAN}
        assert all(s.error and s.error.startswith("SERVICE_ERROR") for s in attempts), attempts
    finally:
        stopped(core)


def test_each_cron_firing_is_a_trace_of_its_own(collector):
    cron = {"prefix": "/cron/", "internal": "cron",
            "settings": {"job": [{"name": "tick", "schedule": "* * * * * * *", "dest": "/ticked/x"}]}}
    core = start_core([cron, {"prefix": "/ticked/", "internal": "echo"}], sections=tracing(collector.endpoint, "node-c"))
    try:
        def firings(c):
            roots = [s for s in c.spans if s.name == "cron tick"]
            done = [r for r in roots if any(s.parent_id == r.span_id for s in c.trace(r.trace_id))]
            return len(done) >= 2 and done
        roots = collector.wait(firings, timeout=10)
    finally:
        stopped(core)
    assert len({r.trace_id for r in roots}) == len(roots), "a new trace each time"
    for root in roots:
        (child,) = [s for s in collector.trace(root.trace_id) if s.parent_id == root.span_id]
        assert (root.kind, root.parent_id) == ("internal", "")
        assert (child.kind, child.attrs["rpc.method"], child.attrs["cumulo.status"]) == ("client", "/ticked/x", "OK")


def test_a_clean_stop_sends_the_spans_still_queued(collector):
    # A batch that would wait a minute: only the stop sends it.
    trace = "abf92f3577b34da6a3ce929d0e0e4736"
    core = start_core([{"prefix": "/echo/", "internal": "echo"}],
                      sections=tracing(collector.endpoint, "node-s", batch_delay_ms=60_000))
    try:
        with core.api() as api:
            api.send_sync("/echo/x", b"", request_info=traced(trace), timeout=5000)
        time.sleep(0.3)
        assert collector.trace(trace) == [], "not sent before the stop"
        core.assert_stopped_cleanly()
        (span,) = collector.wait(lambda c: c.trace(trace), timeout=5)
        assert (span.kind, span.parent_id) == ("client", CLIENT_SPAN)
    finally:
        stopped(core)
