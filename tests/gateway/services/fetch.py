#!/usr/bin/env python3
"""A service that fetches a file from the filesystem service by name, as any
service can: `GET /fetch/get?name=/static/a.txt/get&range=bytes=0-3` sends a
request to that name (with the range in request_info, if given) and answers
with the filesystem service's answer, its response_info as the body's
`x-fetched-info` header list."""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "sdk", "python", "src"))
import cumulo  # noqa: E402


def fetch(api: cumulo.API, request: cumulo.Request):
    args = cumulo.info_dict(request.request)
    info = [("range", args["range"])] if "range" in args else []
    got_info, body = api.send_sync(args["name"], b"", cumulo.info_encode(info))
    pairs = [(k.decode(), v.decode()) for k, v in cumulo.info_parse(got_info)]
    headers = [("x-fetched-" + k, v) for k, v in pairs]
    return headers, body


def setup(api: cumulo.API) -> None:
    api.subscribe("get", fetch)


if __name__ == "__main__":
    cumulo.run(setup)
