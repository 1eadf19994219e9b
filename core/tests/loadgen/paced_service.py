"""A service whose capacity is known by construction, for the load
generator's search tests. It subscribes ``paced/get``; each instance (one per
thread, ``count_thread``, window 1) takes PACED_MS (default 4) per request, so
4 instances answer 4 * 1000 / 4 = 1000 requests per second, however fast the
machine is (as long as it spends well under 1 ms per request).

Each instance keeps its own clock of when it is free again rather than
sleeping PACED_MS after each request arrives: the time Python spends between
requests (up to SLACK) is taken out of the next one, so the capacity is
exactly 1000 / PACED_MS per instance, not a little less on a busy machine.

Changes during a run, counted from the first request (any instance):
- PACED_SLOWER_AFTER_S: from then on each request takes twice as long (the
  capacity halves);
- PACED_STALL_AT_S (and PACED_STALL_MS, default 500): every instance stops
  answering for that long, once.
"""

import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "sdk", "python", "src"))
import cumulo  # noqa: E402

PACED = int(os.environ.get("PACED_MS", "4")) / 1000.0
SLOWER_AFTER = float(os.environ.get("PACED_SLOWER_AFTER_S", "inf"))
STALL_AT = float(os.environ.get("PACED_STALL_AT_S", "inf"))
STALL = int(os.environ.get("PACED_STALL_MS", "500")) / 1000.0
# Time between requests an instance may make up for, seconds: less than one
# request's time, so an idle instance never answers a burst faster than paced.
SLACK = 0.001

_first = []
_first_lock = threading.Lock()
_local = threading.local()


def since_first(now):
    with _first_lock:
        if not _first:
            _first.append(now)
        return now - _first[0]


def paced(api, request):
    now = time.monotonic()
    elapsed = since_first(now)
    took = PACED * 2 if elapsed >= SLOWER_AFTER else PACED
    free_at = getattr(_local, "free_at", 0.0)
    start = max(free_at, now - SLACK)
    stall_start = _first[0] + STALL_AT
    if stall_start <= start < stall_start + STALL:
        start = stall_start + STALL
    done = start + took
    _local.free_at = done
    wait = done - time.monotonic()
    if wait > 0:
        time.sleep(wait)
    return b"<paced>ok</paced>"


def setup(api):
    api.subscribe("paced/get", paced)


if __name__ == "__main__":
    cumulo.run(setup)
