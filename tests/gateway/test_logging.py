"""Logging: nothing per request at the default level; the access log, when
asked for, is written in batches to its own file."""

from __future__ import annotations

import os
import time

from gateway_client import request


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
