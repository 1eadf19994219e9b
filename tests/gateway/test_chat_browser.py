"""examples/chat in a real browser: two headless Chromium pages on the chat
page, one sends, the other shows the message (read from its DOM, and seen
in screenshots taken before and after). Chromium is driven over the
DevTools protocol with the `websockets` client."""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest
from websockets.sync.client import ClientConnection, connect

from conftest import ROOT, Core, free_port

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHAT = ROOT / "examples" / "chat"


class Page:
    """One browser tab, over its DevTools WebSocket."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.ids = itertools.count(1)

    def call(self, method: str, **params: Any) -> dict:
        n = next(self.ids)
        self.ws.send(json.dumps({"id": n, "method": method, "params": params}))
        while True:
            m = json.loads(self.ws.recv(timeout=30))
            if m.get("id") == n:
                if "error" in m:
                    raise RuntimeError(m["error"])
                return m["result"]

    def eval(self, expression: str) -> Any:
        self.call("Page.bringToFront")  # headless keeps only the front tab fully alive
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return r["result"].get("value")

    def wait_for(self, expression: str, what: str, limit: float = 15.0) -> Any:
        end = time.monotonic() + limit
        while time.monotonic() < end:
            v = self.eval(expression)
            if v:
                return v
            time.sleep(0.1)
        raise AssertionError("the page never showed %s; body: %s" % (what, self.eval("document.body.textContent")))

    def screenshot(self, path: Path) -> bytes:
        png = base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])
        path.write_bytes(png)
        return png


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[int]:
    if CHROMIUM is None:
        pytest.skip("chromium is not installed")
    profile = tempfile.mkdtemp(prefix="cumulo-chromium-")
    proc = subprocess.Popen(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir=" + profile,
         "--remote-debugging-port=0", "--window-size=900,700", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        port_file = Path(profile) / "DevToolsActivePort"
        end = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            assert proc.poll() is None and time.monotonic() < end, "chromium did not start"
            time.sleep(0.1)
        yield int(port_file.read_text().split()[0])
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(profile, ignore_errors=True)


@contextlib.contextmanager
def new_page(devtools: int, url: str) -> Iterator[Page]:
    req = urllib.request.Request("http://127.0.0.1:%d/json/new?%s" % (devtools, url), method="PUT")
    target = json.loads(urllib.request.urlopen(req, timeout=10).read())
    with connect(target["webSocketDebuggerUrl"], max_size=None) as ws:
        yield Page(ws)


def test_two_browsers_chat_through_the_gateway(built: None, browser: int, tmp_path: Path) -> None:
    port = free_port()
    config = (CHAT / "cumulo.toml").read_text()
    config = config.replace("port = 8090", "port = %d" % port)
    config = config.replace('"/tmp/cumulo-chat.sock"', '"%s"' % (tmp_path / "cumulo.sock"))
    config = config.replace('path = "python3"', 'path = "%s"' % sys.executable)
    config = config.replace('args = ["chat.py"]', 'args = ["%s"]' % (CHAT / "chat.py"))
    core = Core(config, tmp_path)
    try:
        core.wait_served(port, ["/chat/index.html"])
        base = "http://127.0.0.1:%d/chat/index.html?room=tea" % port
        with new_page(browser, base + "%26user=ann") as ann, new_page(browser, base + "%26user=bob") as bob:
            for p in (ann, bob):
                p.call("Runtime.enable")
                p.wait_for("document.getElementById('state').textContent === 'connected'", "connected")
            # the service's tick reaches both pages
            bob.wait_for("document.getElementById('tick').textContent.startsWith('20')", "a tick")
            before = bob.screenshot(tmp_path / "bob-before.png")
            ann.eval("document.getElementById('text').value = 'hello from ann';"
                     "document.getElementById('say').requestSubmit(); true")
            shown = bob.wait_for(
                "document.getElementById('log').textContent.includes('ann: hello from ann') && "
                "document.getElementById('log').textContent", "ann's message")
            assert "ann: hello from ann" in shown
            after = bob.screenshot(tmp_path / "bob-after.png")
            assert after[:8] == b"\x89PNG\r\n\x1a\n" and len(after) > 5000
            assert after != before, "the screenshot did not change when the message arrived"
            print("screenshots:", tmp_path / "bob-before.png", tmp_path / "bob-after.png")
            # a page that goes away is announced to the room
            ann.call("Page.close")
            bob.wait_for("document.getElementById('log').textContent.includes('ann left')", "ann leaving")
    finally:
        core.stop()
