#!/usr/bin/env python3
"""The chat service: serves the page (GET /chat/index.html), and for the
WebSocket connections of /chat/ws: join and leave notices, messages fanned
out to a room with mcast_async, and a tick pushed to every connection once
a second."""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.parse

try:
    import cumulo
except ImportError:  # not installed: use the SDK of this source tree
    HERE = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(HERE, "..", "..", "sdk", "python", "src"))
    import cumulo

PAGE = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "index.html"), "rb").read()
EVERYONE = "/chat/ws/websocket"  # the name every connection of /chat/ws holds


def params(request: cumulo.Request) -> dict:
    """The room and user of the connection's URL (`?room=lobby&user=ann`)."""
    query = urllib.parse.parse_qs(cumulo.info_dict(request.request_info)["query"])
    return {"room": query.get("room", [""])[0], "user": query.get("user", ["someone"])[0]}


def to_room(api: cumulo.API, room: str, event: dict) -> None:
    if room:
        api.mcast_async("/chat/room/" + room, json.dumps(event).encode())


def page(api: cumulo.API, request: cumulo.Request):
    return [("content-type", "text/html; charset=utf-8")], PAGE


def join(api: cumulo.API, request: cumulo.Request):
    p = params(request)
    to_room(api, p["room"], {"kind": "joined", "user": p["user"]})
    return json.dumps({"kind": "welcome", "room": p["room"]}).encode()


def leave(api: cumulo.API, request: cumulo.Request):
    p = params(request)
    to_room(api, p["room"], {"kind": "left", "user": p["user"], "why": request.request.decode()})
    return b""


def say(api: cumulo.API, request: cumulo.Request):
    p = params(request)
    text = request.request.decode("utf-8", "replace")[:1000]
    to_room(api, p["room"], {"kind": "said", "user": p["user"], "text": text})
    return b""  # nothing back to the sender: it is in the room too


def main() -> None:
    with cumulo.API(0) as api:
        api.subscribe("index.html/get", page)
        api.subscribe("join", join)
        api.subscribe("leave", leave)
        api.subscribe("say", say)
        next_tick = time.monotonic() + 1
        while True:
            if not api.poll(timeout=max(1, int((next_tick - time.monotonic()) * 1000))):
                return
            if time.monotonic() >= next_tick:
                next_tick += 1
                try:
                    api.mcast_async(EVERYONE, json.dumps({"kind": "tick", "time": int(time.time())}).encode())
                except cumulo.CumuloError:
                    pass  # nobody connected
                # the copies' answers (empty OKs) are not needed
                while True:
                    try:
                        api.recv_async(timeout=0)
                    except cumulo.CumuloError:
                        break


if __name__ == "__main__":
    main()
