#!/usr/bin/env python3
"""cumulo http_req example on the C-accelerated codec: answers ``python_c.xml/get``.

The handler is examples/http_req/python's; this program only insists that
cumulo's C extension (cumulo._ccodec) is the active codec, so that the
"Python/C" row of the benchmarks measures what it says.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
from http_req import cumulo, http_req, window  # noqa: E402  (the Python example's handler)

PATTERN = "python_c.xml/get"


def setup(api: cumulo.API) -> None:
    api.subscribe(PATTERN, http_req)


if __name__ == "__main__":
    if not cumulo.ACCELERATED:
        forced = os.environ.get("CUMULO_PURE_PYTHON", "") not in ("", "0")
        sys.exit(
            "http_req (python_c): cumulo's C codec (cumulo._ccodec) is not available%s; "
            "install the SDK with a C compiler present: pip install sdk/python"
            % (" (CUMULO_PURE_PYTHON is set)" if forced else "")
        )
    cumulo.run(setup, window=window())
