"""Logging: nothing per request at the default level; the access log, when
asked for, is written in batches to its own file. With two shards (each runs
the gateway) the gateway is still logged as one, and its access log is in
time order."""

from __future__ import annotations

import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from conftest import Core, free_port
from gateway_client import connect, read_response, request


def test_no_per_request_line_at_the_default_level(cloud):
    marker = "log-marker-%d" % os.getpid()
    before = cloud.core.log()
    for i in range(100):
        assert request(cloud.port, "GET", "/%s/%d" % (marker, i)).status == 404
        assert request(cloud.port, "GET", "/tests/http_req/rust.xml?value=918273%d" % i).status == 200
        assert request(cloud.port, "POST", "/echo/%s" % marker, body=b"x").status == 200
    time.sleep(0.3)
    after = cloud.core.log()
    new_lines = after[len(before):].splitlines()
    assert marker not in after
    assert "918273" not in after
    assert not [line for line in new_lines if "internal::http" in line], new_lines


def test_access_log_is_written_when_enabled(cloud):
    marker = "access-marker-%d" % os.getpid()
    for _ in range(3):
        assert request(cloud.small_port, "GET", "/%s?q=1" % marker).status == 200
    deadline = time.monotonic() + 3  # flushed about once a second
    while True:
        text = cloud.access_log.read_text() if cloud.access_log.exists() else ""
        lines = [line for line in text.splitlines() if marker in line]
        if len(lines) == 3:
            break
        assert time.monotonic() < deadline, text
        time.sleep(0.1)
    assert '"GET /%s?q=1 HTTP/1.1" 200 ' % marker in lines[0]
    assert lines[0].split()[1].startswith("127.0.0.1:")
    assert marker not in cloud.core.log()


def two_shard_core(work: Path, port: int, extra: str = "") -> Core:
    """A core with threads = 2 whatever CUMULO_TEST_THREADS says: a gateway
    with an access log (and `extra` settings) in front of echo."""
    config = f"""
[core]
socket = "{work}/cumulo.sock"
threads = 2

[[service]]
prefix = "/"
internal = "http"
[service.settings]
port = {port}
access_log = "{work}/access.log"
{extra}

[[service]]
prefix = "/echo/"
internal = "echo"
"""
    core = Core(config, work)
    core.wait_served(port, ["/echo/ready"])
    return core


def hammer(port: int, marker: str, seconds: float) -> int:
    """Requests on new connections from 4 threads for `seconds` (the kernel
    spreads the connections over both shards); returns how many."""
    end = time.monotonic() + seconds

    def client(i: int) -> int:
        n = 0
        while time.monotonic() < end:
            assert request(port, "GET", "/echo/%s/%d/%d" % (marker, i, n)).status == 200
            n += 1
        return n

    with ThreadPoolExecutor(max_workers=4) as pool:
        return sum(pool.map(client, range(4)))


def access_lines(path: Path, marker: str, count: int) -> list:
    """The access log's lines once `count` of them hold `marker`."""
    deadline = time.monotonic() + 5  # flushed about once a second
    while True:
        lines = path.read_text().splitlines() if path.exists() else []
        if len([line for line in lines if marker in line]) == count:
            return lines
        assert time.monotonic() < deadline, (count, lines[-5:])
        time.sleep(0.1)


def test_two_shards_log_the_gateway_once_with_every_shards_requests(built, tmp_path):
    port = free_port()
    core = two_shard_core(tmp_path, port)
    try:
        sent = hammer(port, "once", 1.0)
        # Every request so far (with the readiness probes) is in the access log.
        total = len(access_lines(tmp_path / "access.log", "/once/", sent))
    finally:
        core.stop()
    lines = core.log().splitlines()
    listening = [line for line in lines if "gateway listening on http://127.0.0.1:%d" % port in line]
    assert len(listening) == 1, lines
    stopped = [line for line in lines if "stopped accepting connections" in line]
    assert len(stopped) == 1, lines
    m = re.search(r"so far (\d+) requests \(2xx (\d+),", stopped[0])
    assert m, stopped[0]
    assert int(m.group(1)) == total and int(m.group(2)) >= sent, (stopped[0], total, sent)


def test_two_shards_write_the_access_log_in_time_order(built, tmp_path):
    port = free_port()
    core = two_shard_core(tmp_path, port)
    try:
        # Longer than a flush interval, so that both shards hand over batches.
        sent = hammer(port, "order", 2.5)
        lines = access_lines(tmp_path / "access.log", "/order/", sent)
    finally:
        core.stop()
    times = [line.split(" ", 1)[0] for line in lines]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", t) for t in times), lines[:3]
    out_of_order = [(a, b) for a, b in zip(times, times[1:]) if b < a]
    assert not out_of_order, out_of_order[:5]


def held_connection(port: int):
    """The one connection max_connections = 1 lets in, answered once. The
    start's probes close their connections before this one opens, but a
    shard counts one as gone only when its task has ended: until then a new
    one may get the 503, so it is tried again."""
    deadline = time.monotonic() + 5
    while True:
        held = connect(port)
        held.sendall(b"GET /echo/held HTTP/1.1\r\nHost: t\r\n\r\n")
        with held.makefile("rb") as f:
            status = read_response(f).status
        if status == 200:
            return held
        held.close()
        assert status == 503 and time.monotonic() < deadline, status
        time.sleep(0.05)


def test_a_line_of_one_shards_own_says_which_shard(built, tmp_path):
    # max_connections bounds both shards together; each shard refuses the
    # connections it accepted over it, and says so.
    port = free_port()
    core = two_shard_core(tmp_path, port, "max_connections = 1")
    try:
        with held_connection(port) as held:
            for _ in range(20):
                with connect(port) as s, s.makefile("rb") as f:
                    assert read_response(f).status == 503
            deadline = time.monotonic() + 3
            while True:
                refused = [line for line in core.log().splitlines() if "connections refused" in line]
                if refused:
                    break
                assert time.monotonic() < deadline, core.log()
                time.sleep(0.05)
    finally:
        core.stop()
    assert all(re.search(r"connections refused on shard [01]: max_connections \(1\)", line) for line in refused), refused
