"""A service with a known capacity, for the load generator's tests: it
subscribes ``slow/get`` and takes SLOW_DELAY_MS (default 20) per request,
one request at a time (window 1), so each process answers at most
1000 / SLOW_DELAY_MS requests per second."""

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "sdk", "python", "src"))
import cumulo  # noqa: E402

DELAY = int(os.environ.get("SLOW_DELAY_MS", "20")) / 1000.0


def slow(api, request):
    time.sleep(DELAY)
    return b"<slow>ok</slow>"


def setup(api):
    api.subscribe("slow/get", slow)


if __name__ == "__main__":
    cumulo.run(setup)
