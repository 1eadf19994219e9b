"""Small HTTP helpers for the gateway tests: http.client for ordinary
requests, raw sockets where the bytes on the wire matter."""

from __future__ import annotations

import http.client
import socket
from typing import Dict, List, Optional, Tuple


class Reply:
    def __init__(self, status: int, headers: List[Tuple[str, str]], body: bytes) -> None:
        self.status = status
        self.headers = [(k.lower(), v) for k, v in headers]
        self.body = body

    def header(self, name: str) -> Optional[str]:
        """The first value of a header, if present."""
        return next((v for k, v in self.headers if k == name), None)

    def all(self, name: str) -> List[str]:
        return [v for k, v in self.headers if k == name]

    def __repr__(self) -> str:
        return "Reply(%d, %r, %r)" % (self.status, self.headers, self.body[:200])


def request(
    port: int,
    method: str,
    path: str,
    body: Optional[bytes] = None,
    headers: Optional[Dict[str, str]] = None,
    timeout: float = 10.0,
) -> Reply:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        return read(conn)
    finally:
        conn.close()


def read(conn: http.client.HTTPConnection) -> Reply:
    r = conn.getresponse()
    return Reply(r.status, r.getheaders(), r.read())


def connect(port: int, timeout: float = 10.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def read_response(f) -> Reply:
    """One response from a buffered socket file (Content-Length framed)."""
    status_line = f.readline()
    if not status_line:
        raise ConnectionError("connection closed before a response")
    status = int(status_line.split()[1])
    headers: List[Tuple[str, str]] = []
    while True:
        line = f.readline().rstrip(b"\r\n")
        if not line:
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers.append((name.strip(), value.strip()))
    length = int(next((v for k, v in headers if k.lower() == "content-length"), "0"))
    return Reply(status, headers, f.read(length))


def raw_exchange(port: int, data: bytes, timeout: float = 10.0) -> Reply:
    """Writes `data` on a fresh connection and reads one response."""
    with connect(port, timeout) as s:
        s.sendall(data)
        with s.makefile("rb") as f:
            return read_response(f)
