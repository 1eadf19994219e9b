"""A headless Chromium driven over the DevTools protocol, on the pipe
transport (`--remote-debugging-pipe`: JSON messages ended by NUL, read on
fd 3 and written on fd 4), so no WebSocket client is needed. Enough for the
dashboard test: open a page, evaluate JavaScript, click with the mouse,
take screenshots."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, Optional

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
    "--remote-debugging-pipe",
]


class CdpError(RuntimeError):
    pass


class Chromium:
    def __init__(self, binary: str = "chromium", log: Optional[Path] = None) -> None:
        self.profile = tempfile.mkdtemp(prefix="cumulo-chromium-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def pipes_on_3_and_4() -> None:
            a, b = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self._log = open(log, "wb") if log else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            [binary, *FLAGS, "--user-data-dir=" + self.profile, "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
            close_fds=False,
            preexec_fn=pipes_on_3_and_4,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._next_id = 0
        self._answers: Dict[int, dict] = {}
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.session: Optional[str] = None

    def _read(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self._from_chrome, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                with self._cond:
                    self._answers[-1] = {"closed": True}
                    self._cond.notify_all()
                return
            buf += chunk
            while b"\0" in buf:
                msg, buf = buf.split(b"\0", 1)
                m = json.loads(msg)
                if "id" in m:
                    with self._cond:
                        self._answers[m["id"]] = m
                        self._cond.notify_all()

    def send(self, method: str, params: Optional[dict] = None, session: bool = True, timeout: float = 30) -> Any:
        with self._cond:
            self._next_id += 1
            mid = self._next_id
        msg: Dict[str, Any] = {"id": mid, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        end = time.monotonic() + timeout
        with self._cond:
            while mid not in self._answers:
                if -1 in self._answers:
                    raise CdpError("chromium closed the pipe (exit %s)" % self.proc.poll())
                left = end - time.monotonic()
                if left <= 0:
                    raise CdpError("no answer to %s in %.0f s" % (method, timeout))
                self._cond.wait(left)
            m = self._answers.pop(mid)
        if "error" in m:
            raise CdpError("%s: %s" % (method, m["error"]))
        return m.get("result", {})

    def open(self, url: str, width: int = 1400, height: int = 1000) -> None:
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True}, session=False)["sessionId"]
        self.send("Page.enable")
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        self.send("Page.navigate", {"url": url})

    def eval(self, expression: str) -> Any:
        r = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in r:
            raise CdpError("%s: %s" % (expression, r["exceptionDetails"]))
        return r["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 20, what: str = "") -> Any:
        """Evaluates until the value is truthy; returns it."""
        end = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < end:
            try:
                last = self.eval(expression)
            except CdpError as e:
                last = e
            if last and not isinstance(last, CdpError):
                return last
            time.sleep(0.2)
        raise TimeoutError("%s: %s stayed %r for %.0f s" % (what, expression, last, timeout))

    def click(self, selector: str) -> None:
        """A real mouse click (pressed and released) at the element's centre."""
        box = self.eval(
            "(() => { const e = document.querySelector(%s); e.scrollIntoView({block: 'center'});"
            " const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()" % json.dumps(selector)
        )
        x, y = box
        self.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1})

    def type_text(self, text: str) -> None:
        self.send("Input.insertText", {"text": text})

    def screenshot(self, path: Path) -> bytes:
        data = base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"})["data"])
        path.write_bytes(data)
        return data

    def close(self) -> None:
        try:
            self.send("Browser.close", session=False, timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_chrome, self._from_chrome):
            try:
                os.close(fd)
            except OSError:
                pass
        if self._log is not subprocess.DEVNULL:
            self._log.close()
