#!/usr/bin/env python3
"""Prints what it is asked to say (one line on stdout, which the core logs),
so a test can cause a log line it recognises: `/talk/say/get` with the
query `line=...`."""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "sdk", "python", "src"))
import cumulo  # noqa: E402


def say(api: cumulo.API, request: cumulo.Request):
    line = cumulo.info_dict(request.request).get("line", "")
    print("talker says: " + line, flush=True)
    return b"said\n"


def setup(api: cumulo.API) -> None:
    api.subscribe("say/get", say)


if __name__ == "__main__":
    cumulo.run(setup)
