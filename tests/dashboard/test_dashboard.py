"""The dashboard in a real headless Chromium against a running core under
load (the `request_rate` load generator sending to the Rust http_req example
through the core): the services table shows the running services and a
non-zero rate; a click on restart restarts a service and its restart count
goes up; the live log shows a line this test caused; the log-level switch
changes the core's level; 100 more services still render; with a read token
the page shows the same data without its buttons; screenshots are taken and
checked to be non-empty."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from cdp import Chromium

ROOT = Path(__file__).resolve().parents[2]
CUMULO = ROOT / "target" / "release" / "cumulo"
HTTP_REQ = ROOT / "target" / "release" / "http_req"
TALKER = Path(__file__).resolve().parent / "services" / "talker.py"
TOKEN = "dashboard-test-token"
READ_TOKEN = "dashboard-read-token"
RATE = 200


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cloud:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.admin = free_port()
        self.http = free_port()
        config = f"""
[core]
socket = "{work}/cumulo.sock"

[admin]
port = {self.admin}
token = "{TOKEN}"
[[admin.tokens]]
name = "viewer"
role = "read"
token = "{READ_TOKEN}"

# Spans to a collector that is not there: recorded, then failed and counted.
[tracing]
endpoint = "http://127.0.0.1:{free_port()}/v1/traces"
batch_delay_ms = 100

[[service]]
prefix = "/"
internal = "http"
[service.settings]
port = {self.http}

[[service]]
prefix = "/tests/http_req/"
path = "{HTTP_REQ}"
count_process = 2

[[service]]
prefix = "/talk/"
path = "{sys.executable}"
args = ["{TALKER}"]
env = {{ PYTHONUNBUFFERED = "1", CUMULO_PURE_PYTHON = "1" }}

[[service]]
prefix = "/jobs/"
internal = "queue"
settings = {{ dir = "{work}/jobs", mode = "accepted", retry = 0, timeout_ms = 200 }}

[[service]]
prefix = "/echo/"
internal = "echo"

[[service]]
prefix = "/cron/"
internal = "cron"
[[service.settings.job]]
name = "tick"
schedule = "* * * * * * *"
dest = "/echo/tick"

[[service]]
prefix = "/b/"
internal = "chaos"
settings = {{ fail = 1.0 }}

[[policy]]
name = "b"
destinations = ["/b/*"]
[policy.circuit_breaker]
consecutive_failures = 3
open_ms = 600000

[[service]]
prefix = "/load/"
internal = "request_rate"
settings = {{ service_name = "/tests/http_req/rust.xml/get", request = {{ value = 42 }}, request_rate = {RATE} }}
"""
        (work / "cumulo.toml").write_text(config)
        self.log = open(work / "core.log", "wb")
        self.proc = subprocess.Popen(
            [str(CUMULO), "run", "--config", str(work / "cumulo.toml")], stdout=self.log, stderr=subprocess.STDOUT
        )

    def call(self, method: str, path: str, body=None, token: str | None = TOKEN):
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.admin, path), method=method)
        if token:
            req.add_header("Authorization", "Bearer " + token)
        data = json.dumps(body).encode() if body is not None else None
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, data, timeout=10) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def get(self, path: str):
        status, body = self.call("GET", path)
        assert status == 200, (path, status, body)
        return json.loads(body)

    def service(self, prefix: str) -> dict:
        return next(s for s in self.get("/v1/services")["services"] if s["prefix"] == prefix)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cloud]:
    # As scripts/setup.sh builds it (see there for CUMULO_ALL_TARGETS).
    all_targets = ["--all-targets"] if os.environ.get("CUMULO_ALL_TARGETS") else []
    subprocess.run(["cargo", "build", "--release", "--quiet", "--workspace", *all_targets], cwd=ROOT, check=True)
    c = Cloud(tmp_path_factory.mktemp("dashboard"))
    try:
        end = time.monotonic() + 30
        while True:
            assert c.proc.poll() is None, (c.work / "core.log").read_text()
            try:
                if all(s["status"] == "running" for s in c.get("/v1/services")["services"]):
                    break
            except (OSError, AssertionError, StopIteration):
                pass
            assert time.monotonic() < end, "services not running:\n" + (c.work / "core.log").read_text()
            time.sleep(0.2)
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def browser(cloud: Cloud) -> Iterator[Chromium]:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    assert binary, "chromium is not installed (scripts/setup.sh installs it)"
    b = Chromium(binary, log=cloud.work / "chromium.log")
    try:
        b.open("http://127.0.0.1:%d/dashboard#token=%s" % (cloud.admin, TOKEN))
        yield b
    finally:
        b.close()


def row(prefix: str) -> str:
    """JS: the services table row of a prefix."""
    return "[...document.querySelectorAll('#services tbody tr')].find(r => r.querySelector('td.prefix').textContent === %s)" % json.dumps(prefix)


def cell(prefix: str, cls: str) -> str:
    return "(%s || {querySelector: () => null}).querySelector('td.%s')?.textContent" % (row(prefix), cls)


def check_png(data: bytes, path: Path) -> None:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    # a blank 1400x1000 page compresses to a few KiB; tables, a chart and a log do not
    assert len(data) > 20_000, "%s is %d bytes: the page looks empty" % (path, len(data))
    assert path.stat().st_size == len(data)


def test_the_page_and_its_assets_need_no_token_but_the_data_does(cloud: Cloud) -> None:
    for path in ("/dashboard", "/dashboard/app.js", "/dashboard/app.css"):
        status, body = cloud.call("GET", path, token=None)
        assert status == 200 and len(body) > 500, path
    for path in ("/v1/stats", "/v1/logs", "/v1/services"):
        assert cloud.call("GET", path, token=None)[0] == 401, path


def test_services_table_shows_running_services_and_a_live_rate(cloud: Cloud, browser: Chromium) -> None:
    browser.wait_for("document.querySelectorAll('#services tbody tr').length >= 4", what="the services table")
    for prefix in ("/tests/http_req/", "/talk/", "/load/", "/"):
        assert browser.wait_for(cell(prefix, "status") + " === 'running'", what=prefix)
    rate = browser.wait_for(
        "(() => { const t = %s; const r = parseFloat(t); return r > 0 ? r : null; })()" % cell("/tests/http_req/", "rate"),
        what="a non-zero request rate of http_req",
    )
    assert RATE * 0.3 < rate < RATE * 3, rate
    assert browser.wait_for(cell("/tests/http_req/", "p99") + " !== '–'", what="p99")
    assert browser.eval(cell("/tests/http_req/", "instances")).startswith("2")
    # the chart drew something
    assert browser.wait_for(
        "(() => { const c = document.querySelector('#chart'); const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
        " let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++; return n > 1000; })()",
        what="the chart",
    )
    assert browser.wait_for("parseFloat(document.querySelector('#now-rate').textContent) > 0", what="chart rate")
    # nodes: this one
    assert browser.wait_for("document.querySelectorAll('#nodes tbody tr').length === 1", what="nodes")
    shot = cloud.work / "dashboard-services.png"
    check_png(browser.screenshot(shot), shot)


def test_a_click_restarts_a_service_and_its_restart_count_goes_up(cloud: Cloud, browser: Chromium) -> None:
    browser.wait_for(cell("/tests/http_req/", "restarts") + " !== undefined", what="restarts cell")
    before = int(browser.eval(cell("/tests/http_req/", "restarts")))
    api_before = cloud.service("/tests/http_req/")["process_restarts"]
    sid = cloud.service("/tests/http_req/")["id"]
    browser.click("tr[data-service-id='%d'] button.restart" % sid)
    after = browser.wait_for(
        "(() => { const n = parseInt(%s); return n >= %d ? n : null; })()" % (cell("/tests/http_req/", "restarts"), before + 2),
        timeout=30,
        what="the restart count after a click",
    )
    assert after >= before + 2  # both processes, one after the other
    assert cloud.service("/tests/http_req/")["process_restarts"] >= api_before + 2
    browser.wait_for(cell("/tests/http_req/", "status") + " === 'running'", timeout=30, what="running again")
    assert "restarting service" in (cloud.work / "core.log").read_text()


def test_the_log_shows_a_line_the_test_caused(cloud: Cloud, browser: Chromium) -> None:
    marker = "marker-" + uuid.uuid4().hex
    with urllib.request.urlopen("http://127.0.0.1:%d/talk/say?line=%s" % (cloud.http, marker), timeout=10) as r:
        assert r.status == 200
    browser.wait_for("document.querySelector('#log').textContent.includes(%s)" % json.dumps(marker), what="the log line")
    # hidden by the level filter when it asks for warnings only (the line is info)
    browser.eval("(() => { const s = document.querySelector('#log-show'); s.value = 'warn'; s.dispatchEvent(new Event('change')); })()")
    visible = (
        "[...document.querySelectorAll('#log .line')].some(d => !d.hidden && d.textContent.includes(%s))" % json.dumps(marker)
    )
    assert browser.eval(visible) is False
    browser.eval("(() => { const s = document.querySelector('#log-show'); s.value = 'info'; s.dispatchEvent(new Event('change')); })()")
    assert browser.eval(visible) is True


def test_the_log_level_switch_changes_the_core_level(cloud: Cloud, browser: Chromium) -> None:
    browser.eval("(() => { const i = document.querySelector('#log-level'); i.value = ''; i.focus(); })()")
    browser.type_text("debug")
    browser.click("#log-level-form button")
    end = time.monotonic() + 10
    while cloud.get("/v1/log-level")["level"] != "debug":
        assert time.monotonic() < end, "the level did not change"
        time.sleep(0.1)
    browser.wait_for("document.querySelector('#log').textContent.includes(\"log level changed from 'info' to 'debug'\")", what="log")
    cloud.call("PUT", "/v1/log-level", {"level": "info"})


def test_subscriptions_of_a_service_are_shown(cloud: Cloud, browser: Chromium) -> None:
    sid = cloud.service("/talk/")["id"]
    browser.click("tr[data-service-id='%d'] button.subscriptions" % sid)
    assert browser.wait_for(
        "document.querySelector(\"tr.subs[data-for='%d']\")?.textContent.includes('/talk/say/get')" % sid, what="subs"
    )


def test_the_queues_panel_shows_a_dead_letter_and_a_click_purges_it(cloud: Cloud, browser: Chromium) -> None:
    # Through the gateway into the queue, for a name nobody serves: stored,
    # acknowledged, then a dead letter after its one attempt.
    with urllib.request.urlopen("http://127.0.0.1:%d/jobs/nowhere/x?n=1" % cloud.http, timeout=10) as r:
        assert r.status == 200 and int(r.read()) > 0
    queue_row = "document.querySelector(\"#queues tr[data-queue='/jobs/']\")"
    dead = "(() => { const r = %s; return r ? r.children[7].textContent : null; })()" % queue_row
    assert browser.wait_for("!document.querySelector('#queues-section').hidden", what="the queues panel")
    assert browser.wait_for(dead + " === '1'", timeout=20, what="one dead letter in the queues panel")
    shot = cloud.work / "dashboard-queues.png"
    check_png(browser.screenshot(shot), shot)
    browser.click("#queues tr[data-queue='/jobs/'] button.purge")
    assert browser.wait_for(dead + " === '0'", timeout=20, what="no dead letter after the click")
    q = cloud.get("/v1/queues")["queues"][0]
    assert (q["prefix"], q["dead_letters"], q["purged"]) == ("/jobs/", 0, 1), q


def test_the_resiliency_panel_shows_an_open_breaker_and_a_click_closes_it(cloud: Cloud, browser: Chromium) -> None:
    # Through the gateway to the chaos service that always fails: enough for
    # the breaker of some shard to open (each shard keeps its own).
    for _ in range(20):
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/b/x" % cloud.http, timeout=10).read()
        except urllib.error.HTTPError:
            pass
    assert browser.wait_for("!document.querySelector('#resiliency-section').hidden", what="the resiliency panel")
    open_row = "document.querySelector(\"#breakers tr[data-policy='b'][data-state='open']\")"
    assert browser.wait_for(open_row + " !== null", timeout=20, what="an open breaker of policy b")
    assert "trips" in browser.eval("document.querySelector('#resiliency-stats').textContent")
    shot = cloud.work / "dashboard-resiliency.png"
    check_png(browser.screenshot(shot), shot)
    browser.click("#breakers tr[data-policy='b'][data-state='open'] button")
    assert browser.wait_for(open_row + " === null", timeout=20, what="no open breaker after the click")
    assert all(b["state"] == "closed" for b in cloud.get("/v1/resiliency")["breakers"])


def test_the_services_built_on_the_core_show_their_reports(cloud: Cloud, browser: Chromium) -> None:
    # A cron job firing every second at echo: its row counts the events.
    row = "document.querySelector(\"#reports tr[data-kind='cron']\")"
    fired = "(() => { const r = %s; const m = r && /fired (\\d+)/.exec(r.children[2].textContent); return m ? +m[1] : 0; })()" % row
    assert browser.wait_for("!document.querySelector('#reports-section').hidden", what="the reports panel")
    browser.wait_for(fired + " >= 1", timeout=20, what="a cron event in the reports panel")
    first = browser.eval(fired)
    browser.wait_for(fired + " > %d" % first, timeout=10, what="the next cron event counted")
    text = browser.eval(row + ".children[2].textContent")
    assert "name tick" in text and "dest /echo/tick" in text, text
    # queues keep their own panel
    assert browser.eval("document.querySelector(\"#reports tr[data-kind='queue']\")") is None
    shot = cloud.work / "dashboard-reports.png"
    check_png(browser.screenshot(shot), shot)


def test_the_tracing_panel_counts_the_spans_of_each_cron_firing(cloud: Cloud, browser: Chromium) -> None:
    # Each cron firing is a trace: its root span and the core's span of its request.
    recorded = "(() => { const m = /recorded (\\d+)/.exec(document.querySelector('#tracing-stats').textContent); return m ? +m[1] : 0; })()"
    assert browser.wait_for("!document.querySelector('#tracing-section').hidden", what="the tracing panel")
    browser.wait_for(recorded + " >= 2", timeout=20, what="spans counted in the tracing panel")
    # The collector is not there: the exports fail, counted, and nothing else is held up.
    browser.wait_for("/failed [1-9]/.test(document.querySelector('#tracing-stats').textContent)", timeout=30,
                     what="failed exports counted")
    stats = cloud.get("/v1/stats")["tracing"]
    assert stats["recorded"] >= 2 and stats["failed"] >= 1, stats
    shot = cloud.work / "dashboard-tracing.png"
    check_png(browser.screenshot(shot), shot)


def test_a_hundred_more_services_still_render_and_refresh(cloud: Cloud, browser: Chromium) -> None:
    many = [{"prefix": "/many/%03d/" % i, "internal": "echo"} for i in range(100)]
    status, body = cloud.call("POST", "/v1/services", many)
    assert status == 201, body
    browser.wait_for("document.querySelectorAll('#services tbody tr[data-service-id]').length >= 104", what="104 rows")
    # still refreshing every second: the live stamp changes, and a render is quick
    first = browser.eval("document.querySelector('#live').textContent")
    browser.wait_for("document.querySelector('#live').textContent !== %s" % json.dumps(first), timeout=5, what="refresh")
    took = browser.eval("(async () => { const t = performance.now(); await poll(); return performance.now() - t; })()")
    assert took < 1000, "one refresh with 104 services took %.0f ms" % took
    # the filter narrows the table
    browser.eval("(() => { const f = document.querySelector('#service-filter'); f.value = '/many/04'; f.dispatchEvent(new Event('input')); })()")
    shown = browser.eval("[...document.querySelectorAll('#services tbody tr[data-service-id]')].filter(r => !r.hidden).length")
    assert shown == 10, shown
    shot = cloud.work / "dashboard-many.png"
    check_png(browser.screenshot(shot), shot)
    # scale one of them from the table
    sid = cloud.service("/many/040/")["id"]
    browser.eval("document.querySelector(\"tr[data-service-id='%d'] input.scale-to\").value = '2'" % sid)
    browser.click("tr[data-service-id='%d'] button.scale" % sid)
    end = time.monotonic() + 10
    while cloud.service("/many/040/")["count_process"] != 2:
        assert time.monotonic() < end, "not scaled"
        time.sleep(0.1)


def test_the_grafana_dashboard_uses_only_metrics_the_core_exports(cloud: Cloud) -> None:
    import re

    doc = json.loads((ROOT / "docs" / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 15
    used = {m for e in exprs for m in re.findall(r"\b((?:cumulo|process)_[a-z_]+)\b", e)}
    status, body = cloud.call("GET", "/metrics")
    assert status == 200
    exported = {line.split()[2] for line in body.decode().splitlines() if line.startswith("# TYPE ")}
    exported |= {name + suffix for name in set(exported) for suffix in ("_bucket", "_sum", "_count")}
    # the cluster's metrics exist only with [cluster]: they are checked against their documentation
    admin_doc = (ROOT / "docs" / "ADMIN.md").read_text()
    for name in sorted(used):
        if name.startswith(("cumulo_cluster_", "cumulo_node_")):
            assert name.removesuffix("_bucket") in admin_doc, name
        else:
            assert name in exported, "%s is not a metric the core exports" % name


def test_a_read_token_shows_the_data_without_the_buttons(cloud: Cloud, browser: Chromium) -> None:
    assert json.loads(cloud.call("GET", "/v1/whoami", token=READ_TOKEN)[1]) == {"role": "read", "name": "viewer"}
    browser.open("http://127.0.0.1:%d/dashboard#token=%s" % (cloud.admin, READ_TOKEN))
    browser.wait_for("document.body.classList.contains('read-only')", what="the page in read-only mode")
    assert browser.eval("!document.querySelector('#role').hidden")
    browser.wait_for("document.querySelectorAll('#services tbody tr[data-service-id]').length >= 4", what="the services")
    browser.wait_for(cell("/tests/http_req/", "status") + " === 'running'", what="a service's status")
    shown = "(sel) => [...document.querySelectorAll(sel)].filter(e => e.offsetParent !== null).length"
    count = "(sel) => document.querySelectorAll(sel).length"
    for sel in ("#services button.restart", "#services button.remove", "#services button.scale", "#services input.scale-to",
                "#queues button", "#log-level-form button"):
        assert browser.eval("(%s)(%s)" % (count, json.dumps(sel))) > 0, sel
        assert browser.eval("(%s)(%s)" % (shown, json.dumps(sel))) == 0, "%s is shown to a read token" % sel
    assert browser.eval("(%s)('#services button.subscriptions')" % shown) > 0, "reading subscriptions stays"
    assert browser.eval("document.querySelector('#log-level').readOnly") is True
    shot = cloud.work / "dashboard-read-only.png"
    check_png(browser.screenshot(shot), shot)
    # the API behind it refuses the change the page no longer offers
    status, body = cloud.call("PUT", "/v1/log-level", {"level": "debug"}, token=READ_TOKEN)
    assert status == 403 and json.loads(body)["code"] == "forbidden", body
    # an operate token in another tab has its buttons
    browser.open("http://127.0.0.1:%d/dashboard#token=%s" % (cloud.admin, TOKEN))
    browser.wait_for("(%s)('#services button.restart') > 0" % shown, what="the buttons for an operate token")
    assert browser.eval("document.body.classList.contains('read-only')") is False
