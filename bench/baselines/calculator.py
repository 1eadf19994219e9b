#!/usr/bin/env python3
"""The baseline of bench/calculator: the same calculator (the functions of
examples/calculator/calculator.py) served by Python's own http.server, with
no cloud in between: POST /calculator/<op> with {"args": [a, b]}.

Like the cumulo config (2 processes x 2 threads), it runs 2 processes that
share one listening socket (bound before the fork), each a threading server
(one thread per connection), HTTP/1.1 keep-alive.

    bench/baselines/calculator.py PORT
"""

from __future__ import annotations

import json
import os
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "calculator"))
from calculator import OPERATIONS, BadRequest, operands  # noqa: E402

PROCESSES = 2


class Calculator(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the gateway
    disable_nagle_algorithm = True  # TCP_NODELAY, as the gateway (headers and body are two writes)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        op = OPERATIONS.get(self.path.rsplit("/", 1)[-1]) if self.path.startswith("/calculator/") else None
        if op is None:
            self.answer(404, {"error": "no such operation"})
            return
        try:
            self.answer(200, {"result": op(*operands(body))})
        except BadRequest as why:
            self.answer(400, {"error": str(why)})

    def answer(self, status: int, value: dict) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:  # no per-request log, as the gateway
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 4096

    def handle_error(self, request, client_address) -> None:
        # wrk resets its connections when it stops: not worth a traceback.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def main() -> None:
    server = Server(("127.0.0.1", int(sys.argv[1])), Calculator)
    children = []
    for _ in range(PROCESSES - 1):
        pid = os.fork()
        if pid == 0:
            server.serve_forever()
            os._exit(0)
        children.append(pid)

    def stop(*_):
        for pid in children:
            os.kill(pid, signal.SIGTERM)
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    server.serve_forever()


if __name__ == "__main__":
    main()
