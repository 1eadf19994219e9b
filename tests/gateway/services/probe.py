#!/usr/bin/env python3
"""A service for the gateway tests: each pattern shows one way an answer can
look from the HTTP side (status and headers set in response_info, malformed
response_info, a failing handler, a crash, a slow answer)."""

from __future__ import annotations

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "sdk", "python", "src"))
import cumulo  # noqa: E402


def created(api: cumulo.API, request: cumulo.Request):
    info = [("status", "201"), ("content-type", "application/json"), ("x-answer", "yes"), ("x-answer", "again")]
    return info, b'{"created": true}'


def bad_info(api: cumulo.API, request: cumulo.Request):
    return b"status\x00not-a-number\x00", b"ignored"


def fail(api: cumulo.API, request: cumulo.Request):
    raise RuntimeError("this handler always fails")


def crash(api: cumulo.API, request: cumulo.Request):
    os._exit(3)


def sleep(api: cumulo.API, request: cumulo.Request):
    """Sleeps for the `ms` query parameter, then answers."""
    ms = int(cumulo.info_dict(request.request).get("ms", "0"))
    time.sleep(ms / 1000)
    return b"slept %d ms" % ms


def info(api: cumulo.API, request: cumulo.Request):
    """Answers with the request_info it got: as the body, and its keys in
    `x-info-keys` (so that HEAD shows them too)."""
    keys = [k.decode() for k, _ in cumulo.info_parse(request.request_info)]
    return [("x-info-keys", ",".join(keys))], request.request_info


def setup(api: cumulo.API) -> None:
    api.subscribe("created/get", created)
    api.subscribe("bad-info/get", bad_info)
    api.subscribe("fail/get", fail)
    api.subscribe("crash/get", crash)
    api.subscribe("sleep/get", sleep)
    api.subscribe("info/get", info)
    api.subscribe("info/head", info)


if __name__ == "__main__":
    cumulo.run(setup)
