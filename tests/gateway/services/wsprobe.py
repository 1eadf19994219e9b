#!/usr/bin/env python3
"""A service for the WebSocket tests: connect and disconnect notifications
(recorded, and listed by `events/get`), calls with a request id, and HTTP
endpoints that push to connections' names (`push`, `mcast`, `flood`)."""

from __future__ import annotations

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "sdk", "python", "src"))
import cumulo  # noqa: E402

EVENTS: list = []


def connected(api: cumulo.API, request: cumulo.Request):
    info = cumulo.info_dict(request.request_info)
    EVENTS.append({"event": "connect", "id": info["websocket_id"], "name": info["websocket_name"],
                   "query": info["query"]})
    return b"welcome " + info["websocket_id"].encode()


def disconnected(api: cumulo.API, request: cumulo.Request):
    info = cumulo.info_dict(request.request_info)
    EVENTS.append({"event": "disconnect", "id": info["websocket_id"], "reason": info["websocket_reason"],
                   "body": request.request.decode()})
    return b""


def call(api: cumulo.API, request: cumulo.Request):
    """Protocol "id": the message is JSON; sleeps `ms`, answers `echo`
    and which request id the gateway saw."""
    message = json.loads(request.request)
    time.sleep(message.get("ms", 0) / 1000)
    seen = cumulo.info_dict(request.request_info).get("websocket_request_id")
    return json.dumps({"echo": message.get("echo"), "seen_id": seen, "pid": os.getpid()}).encode()


def events(api: cumulo.API, request: cumulo.Request):
    return [("content-type", "application/json")], json.dumps(EVENTS).encode()


def push(api: cumulo.API, request: cumulo.Request):
    """send_sync of `body` to `name`: the connection answers once queued."""
    q = cumulo.info_dict(request.request)
    try:
        api.send_sync(q["name"], q.get("body", "").encode(), timeout=2000)
        return b"OK"
    except cumulo.CumuloError as e:
        return [("status", "502")], str(e).encode()


def mcast(api: cumulo.API, request: cumulo.Request):
    """mcast_async of `body` to `name`; answers how many copies went out
    once every copy is answered."""
    q = cumulo.info_dict(request.request)
    ids = api.mcast_async(q["name"], q.get("body", "").encode(), timeout=5000)
    ok = 0
    for t in ids:
        if api.recv_async(t, timeout=6000).status == cumulo.Status.OK:
            ok += 1
    return json.dumps({"copies": len(ids), "ok": ok}).encode()


def flood(api: cumulo.API, request: cumulo.Request):
    """Pushes `n` messages of `size` bytes to `name`, stopping at the
    first refusal: what a browser that does not read gets."""
    q = cumulo.info_dict(request.request)
    body = b"x" * int(q["size"])
    sent, error = 0, None
    for _ in range(int(q["n"])):
        try:
            api.send_sync(q["name"], body, timeout=2000)
            sent += 1
        except cumulo.CumuloError as e:
            error = str(e)
            break
    return json.dumps({"sent": sent, "error": error}).encode()


def setup(api: cumulo.API) -> None:
    api.subscribe("connected", connected)
    api.subscribe("disconnected", disconnected)
    api.subscribe("call", call)
    api.subscribe("events/get", events)
    api.subscribe("push/get", push)
    api.subscribe("mcast/get", mcast)
    api.subscribe("flood/get", flood)


if __name__ == "__main__":
    cumulo.run(setup)
