"""Run a whole service process: one instance per thread (docs/SDK_GUIDE.md)."""

from __future__ import annotations

import logging
import os
import queue
import threading
from typing import Any, Callable, Optional, Tuple

from .api import API

log = logging.getLogger("cumulo")


def run(setup: Callable[[API], None], thread_count: Optional[int] = None, **api_options: Any) -> None:
    """Serve until the core says TERMINATE.

    Starts ``thread_count`` threads (default ``CUMULO_THREAD_COUNT``, else 1);
    each creates ``API(thread_index, **api_options)``, calls ``setup(api)``
    to subscribe, then polls. Returns when every instance has been
    terminated; if one fails, its exception is raised at once so the process
    exits and the core can restart it.
    """
    if thread_count is None:
        thread_count = int(os.environ.get("CUMULO_THREAD_COUNT", "1") or "1")
    if thread_count < 1:
        raise ValueError("thread_count must be at least 1, got %d" % thread_count)
    finished: "queue.Queue[Tuple[int, Optional[BaseException]]]" = queue.Queue()

    def serve(thread_index: int) -> None:
        try:
            with API(thread_index, **api_options) as api:
                setup(api)
                while api.poll():
                    pass
        except BaseException as exc:  # reported to the main thread, which raises it
            log.error("instance %d stopped: %s", thread_index, exc)
            finished.put((thread_index, exc))
        else:
            finished.put((thread_index, None))

    for index in range(thread_count):
        # Daemon threads: if one instance fails, the others must not keep the process alive.
        threading.Thread(target=serve, args=(index,), name="cumulo-%d" % index, daemon=True).start()
    for _ in range(thread_count):
        _, error = finished.get()
        if error is not None:
            raise error
