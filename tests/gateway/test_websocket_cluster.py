"""WebSocket across nodes: a browser connected to node A's gateway gets a
push from a service on node B (send_sync and mcast_async to the
connection's name), and its messages reach a service that runs only on B.
Two real `cumulo` nodes on a real `nats-server`."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Iterator

import pytest
import websockets

from conftest import Core, free_port
from gateway_client import request

WSPROBE = Path(__file__).resolve().parent / "services" / "wsprobe.py"
NATS = shutil.which("nats-server") or "/usr/sbin/nats-server"


def node(name: str, node_id: int, work: Path, nats: int, body: str) -> str:
    return f"""
[core]
node_id = {node_id}
socket = "{work}/{name}.sock"
[admin]
port = 0
[cluster]
node = "{name}"
servers = ["nats://127.0.0.1:{nats}"]
name = "ws-test"
heartbeat_ms = 200
purge_ms = 2000
{body}
"""


@pytest.fixture
def two_nodes(built: None, tmp_path: Path) -> Iterator[tuple]:
    if not Path(NATS).exists():
        pytest.skip("nats-server is not installed")
    nats_port = free_port()
    nats = subprocess.Popen([NATS, "-a", "127.0.0.1", "-p", str(nats_port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    a_port, b_port = free_port(), free_port()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = Core(node("a", 1, tmp_path, nats_port, f"""
[[service]]
prefix = "/"
internal = "http"
[service.settings]
port = {a_port}
[[service.settings.websocket]]
path = "/live/"
request_name = "/wsprobe/call"
protocol = "id"
"""), tmp_path / "a")
    b = Core(node("b", 2, tmp_path, nats_port, f"""
[[service]]
prefix = "/"
internal = "http"
[service.settings]
port = {b_port}

[[service]]
prefix = "/wsprobe/"
path = "{sys.executable}"
args = ["{WSPROBE}"]
env = {{ PYTHONUNBUFFERED = "1", CUMULO_PURE_PYTHON = "1" }}
"""), tmp_path / "b")
    try:
        b.wait_served(b_port, ["/wsprobe/events"])
        a.wait_served(a_port, ["/wsprobe/events"])  # B's service seen from A: the cloud is formed
        yield a_port, b_port
    finally:
        a.stop()
        b.stop()
        nats.kill()
        nats.wait()


def test_a_service_on_node_b_reaches_a_browser_on_node_a(two_nodes: tuple) -> None:
    a_port, b_port = two_nodes

    def from_b(path: str, **q: str) -> bytes:
        return request(b_port, "GET", path + "?" + urllib.parse.urlencode(q)).body

    async def go():
        async with websockets.connect("ws://127.0.0.1:%d/live/far" % a_port) as c:
            # messages in go to a service only B runs
            await c.send(json.dumps({"id": 1, "echo": "to b"}))
            a = json.loads(await asyncio.wait_for(c.recv(), 10))
            assert a["id"] == 1 and a["response"]["echo"] == "to b", a
            # the connection's name reaches B within a snapshot: retry until it does
            deadline = time.monotonic() + 10
            while True:
                r = await asyncio.to_thread(from_b, "/wsprobe/push", name="/live/far/websocket", body="pushed from b")
                if r == b"OK" or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.1)
            assert r == b"OK", r
            assert await asyncio.wait_for(c.recv(), 10) == "pushed from b"
            got = json.loads(await asyncio.to_thread(from_b, "/wsprobe/mcast", name="/live/far/websocket", body="mcast from b"))
            assert got == {"copies": 1, "ok": 1}
            assert await asyncio.wait_for(c.recv(), 10) == "mcast from b"

    asyncio.run(go())
