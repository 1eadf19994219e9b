"""A stand-in for the cumulo core: a real listening socket driven by a test script.

The script runs in a thread and plays the core's side; assertion failures in
it are re-raised by ``FakeCore.join`` in the test.
"""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import tempfile
import threading
from typing import Any, Callable, List, Optional, Type, TypeVar

from cumulo import _pycodec
from cumulo import messages as m

T = TypeVar("T")

WELCOME = m.Welcome(
    version=1, node_id=1, instance_id=7, process_index=0, process_count=1, thread_count=1,
    window=1, max_frame=1 << 20, timeout_async=5000, timeout_sync=5000,
    timeout_terminate=2000, priority_default=0, keepalive=5000, prefix="/tests/",
)


class Conn:
    """The core's end of one instance connection."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sock.settimeout(5.0)
        self.buf = bytearray()
        self.pending: List[m.Message] = []

    def recv(self) -> m.Message:
        while not self.pending:
            frames, end = _pycodec.decode_frames(self.buf, 0, len(self.buf), 1 << 30)
            del self.buf[:end]
            self.pending.extend(frames)
            if self.pending:
                break
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("the instance closed the connection")
            self.buf += chunk
        return self.pending.pop(0)

    def expect(self, cls: Type[T]) -> T:
        message = self.recv()
        assert type(message) is cls, "expected %s, got %r" % (cls.__name__, message)
        return message  # type: ignore[return-value]

    def send(self, *messages: m.Message) -> None:
        self.sock.sendall(b"".join(_pycodec.encode(msg) for msg in messages))

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def closed_by_peer(self) -> bool:
        """True if the instance has closed its end (after sending anything left)."""
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
                self.buf += chunk
        except socket.timeout:
            return False

    def close(self) -> None:
        self.sock.close()


class FakeCore:
    """Listens on a Unix socket (or TCP) and runs ``script(core)`` in a thread."""

    def __init__(self, script: Callable[["FakeCore"], None], tcp: bool = False,
                 tls: Optional[ssl.SSLContext] = None) -> None:
        """``tls``: a server context; the listener is then TCP and each accepted connection TLS."""
        self.dir = tempfile.mkdtemp(prefix="cumulo-test-", dir="/tmp")  # short: sun_path is ~100 bytes
        self.tls = tls
        if tcp or tls is not None:
            self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.listener.bind(("127.0.0.1", 0))
            self.address = "tcp://127.0.0.1:%d" % self.listener.getsockname()[1]
        else:
            path = os.path.join(self.dir, "core.sock")
            self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.listener.bind(path)
            self.address = path
        self.listener.listen(8)
        self.listener.settimeout(10.0)
        self.conns: List[Conn] = []
        self.error: Optional[BaseException] = None
        self.thread = threading.Thread(target=self._run, args=(script,), daemon=True)
        self.thread.start()

    def _run(self, script: Callable[["FakeCore"], None]) -> None:
        try:
            script(self)
        except BaseException as exc:
            self.error = exc

    def accept(self) -> Conn:
        sock, _ = self.listener.accept()
        if self.tls is not None:
            sock.settimeout(5.0)
            try:
                sock = self.tls.wrap_socket(sock, server_side=True)
            except BaseException:
                sock.close()
                raise
        conn = Conn(sock)
        self.conns.append(conn)
        return conn

    def handshake(self, welcome: m.Welcome = WELCOME, **changes: Any) -> "tuple[Conn, m.Hello]":
        """Accept one instance, read its HELLO, answer WELCOME."""
        conn = self.accept()
        hello = conn.expect(m.Hello)
        conn.send(welcome._replace(**changes))
        return conn, hello

    def join(self, timeout: float = 10.0) -> None:
        self.thread.join(timeout)
        try:
            assert not self.thread.is_alive(), "the fake core's script did not finish"
            if self.error is not None:
                raise self.error
        finally:
            for conn in self.conns:
                conn.close()
            self.listener.close()
            shutil.rmtree(self.dir, ignore_errors=True)


def tid(n: int, instance: int = 7) -> bytes:
    """A trans_id of node 1 and the given instance."""
    return n.to_bytes(8, "big") + (1).to_bytes(4, "big") + instance.to_bytes(4, "big")


def request(trans_id: bytes, pattern: str, body: bytes = b"", info: bytes = b"",
            name: Optional[str] = None, flags: int = m.FLAG_SYNC) -> m.Request:
    return m.Request(trans_id, 4000, 0, flags, (1 << 32) | 9, name or pattern, pattern, info, body)
