#!/usr/bin/env python3
"""cumulo http_req example service (docs/SDK_GUIDE.md): answers ``python.xml/get``.

The request body is key/value encoded; an integer under ``value`` is echoed
back as XML. One instance per thread, as many as CUMULO_THREAD_COUNT.
"""

from __future__ import annotations

import os
import re
import sys

try:
    import cumulo
except ImportError:  # not installed: use the SDK of this source tree
    HERE = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "sdk", "python", "src"))
    import cumulo

PATTERN = "python.xml/get"
INTEGER = re.compile(rb"[+-]?[0-9]+\Z")
RESPONSE_INFO = cumulo.info_encode([("content-type", "text/xml; charset=utf-8")])
NO_VALUE = b"<http_test><error>no value specified</error></http_test>"


def parse_value(body: bytes) -> "int | None":
    """The integer under key ``value`` (first occurrence), if any and if it fits in 64 bits."""
    try:
        pairs = cumulo.info_parse(body)
    except cumulo.DecodeError:
        return None
    for key, value in pairs:
        if key == b"value":
            if not INTEGER.match(value):
                return None
            number = int(value)
            return number if -(1 << 63) <= number < (1 << 63) else None
    return None


def http_req(api: cumulo.API, request: cumulo.Request) -> "tuple[bytes, bytes]":
    number = parse_value(request.request)
    if number is None:
        return RESPONSE_INFO, NO_VALUE
    return RESPONSE_INFO, b"<http_test><value>%d</value></http_test>" % number


def setup(api: cumulo.API) -> None:
    api.subscribe(PATTERN, http_req)


def window() -> int:
    """HTTP_REQ_WINDOW: requests the core may deliver at once (default 1); with
    more, one read brings several and their answers go out in one write.
    Anything but a positive integer stops the process."""
    text = os.environ.get("HTTP_REQ_WINDOW", "")
    if text == "":
        return 1
    if text.isascii() and text.isdigit() and 1 <= int(text) <= 0xFFFFFFFF:
        return int(text)
    sys.exit(f"http_req: HTTP_REQ_WINDOW='{text}' is not a positive integer")


if __name__ == "__main__":
    cumulo.run(setup, window=window())
