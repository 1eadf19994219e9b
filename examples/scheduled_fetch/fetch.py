#!/usr/bin/env python3
"""The scheduled job of examples/scheduled_fetch: at each cron event
(/fetch/run), GET the URL the job names through the http_client service
(/http/get), then hand what came back to the store (/store/put/post).

Nothing here speaks HTTP or keeps a connection: the core's http_client
keeps them alive, checks certificates and turns every failure (DNS,
connect, TLS, timeout, too large) into an answer that says which.
"""

from __future__ import annotations

import json
import os
import sys

try:
    import cumulo
except ImportError:  # not installed: use the SDK of this source tree
    HERE = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(HERE, "..", "..", "sdk", "python", "src"))
    import cumulo

from cumulo import info_dict, info_encode


def run(api: cumulo.API, request: cumulo.Request) -> bytes:
    job = info_dict(request.request_info)
    url = job["url"]
    headers = [(k, v) for k, v in job.items() if k == "accept"]
    answer_info, body = api.send_sync("/http/get", b"", info_encode([("url", url)] + headers))
    answer = info_dict(answer_info)
    result = {
        "url": url,
        "status": int(answer.get("status", "0")),
        # set when no server answered: dns, connect, tls, timeout, too_large, ...
        "error": answer.get("http_client_error"),
        "fetched_at": job.get("cron-time"),
        "body": body.decode("utf-8", "replace"),
    }
    api.send_sync("/store/put/post", json.dumps(result).encode())
    return b"stored"


def setup(api: cumulo.API) -> None:
    api.subscribe("run", run)


if __name__ == "__main__":
    cumulo.run(setup)
