#!/usr/bin/env python3
"""The store of examples/scheduled_fetch: /store/put/post keeps a result
(the last 100), /store/latest/get answers the newest as JSON (404 before
the first), /store/all/get all of them, newest first.

One process, one thread (the defaults): the results live in its memory.
"""

from __future__ import annotations

import collections
import json
import os
import sys

try:
    import cumulo
except ImportError:  # not installed: use the SDK of this source tree
    HERE = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(HERE, "..", "..", "sdk", "python", "src"))
    import cumulo

KEEP = 100
JSON = ("content-type", "application/json")
results: collections.deque = collections.deque(maxlen=KEEP)


def put(api: cumulo.API, request: cumulo.Request) -> bytes:
    results.appendleft(json.loads(request.request))
    return b""


def latest(api: cumulo.API, request: cumulo.Request):
    if not results:
        return [("status", "404"), JSON], b'{"error": "nothing fetched yet"}'
    return [JSON], json.dumps(results[0]).encode()


def everything(api: cumulo.API, request: cumulo.Request):
    return [JSON], json.dumps(list(results)).encode()


def setup(api: cumulo.API) -> None:
    api.subscribe("put/post", put)
    api.subscribe("latest/get", latest)
    api.subscribe("all/get", everything)


if __name__ == "__main__":
    cumulo.run(setup)
