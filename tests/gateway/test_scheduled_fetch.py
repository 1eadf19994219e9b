"""examples/scheduled_fetch from its own config file: cron fires, the job
calls an HTTP server on loopback through http_client, the store keeps the
answer and the gateway serves it."""

from __future__ import annotations

import http.server
import json
import re
import threading
import time

import pytest

from conftest import ROOT, Core, free_port
from gateway_client import request

EXAMPLE = ROOT / "examples" / "scheduled_fetch"


class Api(http.server.BaseHTTPRequestHandler):
    """The outside API: counts its calls and answers each with its number."""

    calls = 0

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        Api.calls += 1
        body = ("zen %d for %s" % (Api.calls, self.headers.get("accept"))).encode()
        self.send_response(200)
        self.send_header("content-type", "text/plain")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def scheduled(built, tmp_path_factory):
    work = tmp_path_factory.mktemp("scheduled_fetch")
    api = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Api)
    threading.Thread(target=api.serve_forever, daemon=True).start()
    port = free_port()
    config = (EXAMPLE / "cumulo.toml").read_text()
    config = re.sub(r'(?m)^socket = ".*"$', 'socket = "%s/cumulo.sock"' % work, config)
    config = re.sub(r"(?m)^port = 8080$", "port = %d" % port, config)
    # The API on loopback instead of the outside one, and an event every second.
    config = config.replace("https://api.github.com/zen", "http://127.0.0.1:%d/zen" % api.server_port)
    config = config.replace('schedule = "*/10 * * * * * *"', 'schedule = "* * * * * * *"')
    for script in ("fetch.py", "store.py"):
        config = config.replace('args = ["%s"]' % script, 'args = ["%s"]' % (EXAMPLE / script))
    core = Core(config, work)
    try:
        core.wait_served(port, ["/store/all"])
        yield port
    finally:
        core.stop()
        api.shutdown()


def latest(port: int):
    r = request(port, "GET", "/store/latest")
    return r.status, json.loads(r.body)


def test_each_event_fetches_and_stores_an_answer(scheduled):
    end = time.monotonic() + 15
    status, answer = latest(scheduled)
    while status != 200 and time.monotonic() < end:
        time.sleep(0.2)
        status, answer = latest(scheduled)
    assert status == 200, answer
    assert answer["status"] == 200 and answer["error"] is None, answer
    assert re.fullmatch(r"zen \d+ for text/plain", answer["body"]), answer
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", answer["fetched_at"]), answer
    # one more event a second later: a newer answer, stored first
    first = answer["body"]
    while latest(scheduled)[1]["body"] == first and time.monotonic() < end + 5:
        time.sleep(0.2)
    results = json.loads(request(scheduled, "GET", "/store/all").body)
    assert len(results) >= 2 and results[0]["body"] != first, results
    assert results[0]["fetched_at"] > results[1]["fetched_at"], results
