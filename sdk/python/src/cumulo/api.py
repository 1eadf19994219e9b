"""One service instance: a connection to the core (docs/SDK_GUIDE.md)."""

from __future__ import annotations

import logging
import os
import socket
import struct
import time
from collections import deque
from typing import (
    TYPE_CHECKING, Any, Callable, Deque, Dict, List, NamedTuple, NoReturn, Optional, Tuple, Type, Union,
)

from . import codec
from . import messages as m
from .errors import ConnectionClosed, CumuloError, DecodeError, Status
from .info import Pairs, info_dict, info_encode, info_parse

if TYPE_CHECKING:
    import ssl

log = logging.getLogger("cumulo")

Bytes = Union[bytes, bytearray, memoryview]
#: What a handler returns: the response, (response_info, response), or None
#: (an empty response, or nothing at all if the handler forwarded the request).
#: response_info may also be given as a mapping or pairs, key/value encoded.
HandlerResult = Union[Bytes, Tuple[Union[Bytes, Pairs], Bytes], None]
Handler = Callable[["API", m.Request], HandlerResult]

PROTOCOL_VERSION = 1
DEFAULT_MAX_FRAME = 8 * 1024 * 1024
# REQUEST carries more than the SEND it comes from (source, pattern), so a
# request the core accepted may be slightly over max_frame when delivered.
REQUEST_OVERHEAD = 8 + 2 + 0xFFFF
# Extra time given to the core to deliver its own TIMEOUT before giving up locally.
LOCAL_GRACE_MS = 5000
READ_SIZE = 64 * 1024

_TIME_BE = struct.Struct(">Q")
_NODE_INSTANCE_BE = struct.Struct(">II")


# ---- trace context (PROTOCOL.md 5.1) ---------------------------------------
# While a handler runs for a request R that carries `traceparent`, its
# send_sync, send_async, mcast_async and forward inherit R's `traceparent`
# (and `tracestate`) unless their request_info has a `traceparent` of its own.


def _trace_context(request_info: Bytes) -> Optional[bytes]:
    """R's traceparent and tracestate pairs, encoded, or None when R has no traceparent."""
    if b"traceparent\0" not in request_info:  # the common case: nothing parsed
        return None
    try:
        pairs = info_parse(request_info)
    except DecodeError:
        return None
    parent = state = None
    for key, value in pairs:  # the first value of a repeated key wins, as in info_dict
        if key == b"traceparent" and parent is None:
            parent = value
        elif key == b"tracestate" and state is None:
            state = value
    if parent is None:
        return None
    return info_encode([(b"traceparent", parent)] + ([(b"tracestate", state)] if state is not None else []))


def _with_trace(request_info: Bytes, trace: bytes) -> Bytes:
    """``request_info`` with ``trace`` appended, unless it has a traceparent already."""
    try:
        if any(key == b"traceparent" for key, _ in info_parse(request_info)):
            return request_info
    except DecodeError:
        return request_info  # malformed: sent as given, for the core to refuse
    return bytes(request_info) + trace


class _TLSOptions(NamedTuple):
    """PEM files for TLS to the core: the CA(s) to trust, and an optional client certificate."""

    ca: str
    cert: str = ""
    key: str = ""


def _tls_options(ca: Optional[str], cert: Optional[str], key: Optional[str]) -> Optional[_TLSOptions]:
    """The explicit options, else CUMULO_TLS_CA/CERT/KEY; None without a CA (no TLS)."""
    env = os.environ.get
    ca = env("CUMULO_TLS_CA", "") if ca is None else ca
    if not ca:
        return None
    cert = env("CUMULO_TLS_CERT", "") if cert is None else cert
    key = env("CUMULO_TLS_KEY", "") if key is None else key
    if bool(cert) != bool(key):
        raise ValueError("a client certificate needs both tls_cert (CUMULO_TLS_CERT) and tls_key "
                         "(CUMULO_TLS_KEY); only the %s is set" % ("certificate" if cert else "key"))
    return _TLSOptions(ca, cert, key)


def _tls_context(tls: _TLSOptions) -> "ssl.SSLContext":
    import ssl  # only programs that use TLS pay for loading it

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies the certificate and its name
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    # The given CA file only: the system's store is not consulted.
    try:
        context.load_verify_locations(cafile=tls.ca)
    except (OSError, ValueError) as exc:
        raise ValueError("cannot load the TLS CA file %r (tls_ca, CUMULO_TLS_CA): %s" % (tls.ca, exc)) from exc
    if tls.cert:
        try:
            context.load_cert_chain(tls.cert, tls.key)
        except (OSError, ValueError) as exc:
            raise ValueError("cannot load the TLS client certificate %r and key %r: %s"
                             % (tls.cert, tls.key, exc)) from exc
    return context


def _connect(address: str, timeout: float, tls: Optional[_TLSOptions] = None) -> socket.socket:
    if address.startswith("tcp://"):
        host, _, port = address[len("tcp://"):].rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError("bad CUMULO_SOCKET %r: expected tcp://HOST:PORT" % address)
        host = host.strip("[]")
        context = _tls_context(tls) if tls is not None else None  # file errors before connecting
        sock = socket.create_connection((host, int(port)), timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if context is not None:
                # The handshake runs here, under the connect timeout; a refused
                # certificate raises ssl.SSLError (an OSError) with OpenSSL's reason.
                sock = context.wrap_socket(sock, server_hostname=host)
        except BaseException:
            sock.close()
            raise
        return sock
    if not address:
        raise ValueError("no socket to connect to: set CUMULO_SOCKET or pass address=")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(address)
    except BaseException:
        sock.close()
        raise
    return sock


class API:
    """One instance: a connection to the core, its subscriptions and its pending messages.

    Not thread-safe: each thread creates its own (see ``cumulo.run``).
    All timeouts are in milliseconds, as on the wire.
    """

    def __init__(
        self,
        thread_index: int = 0,
        *,
        address: Optional[str] = None,
        token: Optional[str] = None,
        prefix: Optional[str] = None,
        window: int = 1,
        connect_timeout: float = 10.0,
        tls_ca: Optional[str] = None,
        tls_cert: Optional[str] = None,
        tls_key: Optional[str] = None,
    ) -> None:
        """Connect, send HELLO and wait for WELCOME.

        ``address`` (default ``CUMULO_SOCKET``) is a Unix socket path or
        ``tcp://host:port``. ``token`` defaults to ``CUMULO_TOKEN``; without
        one the instance is unmanaged and must name its ``prefix``.
        Raises ``CumuloError`` with the core's status if it answers ERROR.

        With a ``tcp://`` address and a CA file (``tls_ca``, default
        ``CUMULO_TLS_CA``) the connection is TLS, the core's certificate
        verified against that file and the host name; ``tls_cert`` and
        ``tls_key`` (default ``CUMULO_TLS_CERT``, ``CUMULO_TLS_KEY``) give a
        client certificate. A failed handshake raises ``ssl.SSLError``.
        """
        if address is None:
            address = os.environ.get("CUMULO_SOCKET", "")
        if token is None:
            token = os.environ.get("CUMULO_TOKEN", "")
        if not token and not prefix:
            raise ValueError("an unmanaged instance (no CUMULO_TOKEN) must pass prefix=")
        self.thread_index = thread_index
        # Bound once: tests swap the codec implementation before creating an API.
        self._decode_frames = codec.decode_frames
        self._encode = codec.encode
        self._encode_send = codec.encode_send
        self._encode_return = codec.encode_return
        self._encode_pong = codec.encode_pong
        self._serve = codec.serve

        self._closed = False
        # What a non-blocking read of a TLS socket raises while a record is incomplete.
        self._tls_not_ready: Tuple[Type[BaseException], ...] = ()
        self._timeout: Optional[float] = -1.0  # the socket's current timeout; -1 = unknown
        self._rbuf = bytearray(READ_SIZE)
        self._rview = memoryview(self._rbuf)
        self._rstart = 0
        self._rend = 0
        self._out: List[bytes] = []
        self._in_handlers = False  # while poll runs handlers, sends are batched
        self._max_frame = DEFAULT_MAX_FRAME
        self._recv_limit = DEFAULT_MAX_FRAME + REQUEST_OVERHEAD

        self._requests: Deque[m.Request] = deque()
        self._responses: Dict[bytes, m.Response] = {}
        self._replies: Dict[int, m.Reply] = {}
        self._mcast_sent: Dict[bytes, m.McastSent] = {}
        self._terminated = False
        self._welcome: Optional[m.Welcome] = None

        self._handlers: Dict[str, Handler] = {}
        self._subscriptions: Dict[str, int] = {}
        self._forwarded: set[bytes] = set()
        # The trace context of the request whose handler is running (PROTOCOL.md 5.1):
        # its encoded traceparent/tracestate pairs, else None. Kept on the instance:
        # an API belongs to one thread and runs one handler at a time.
        self._trace: Optional[bytes] = None
        self._last_req_id = 0
        self._last_time_ns = 0
        self._tid_suffix = b""

        self._dispatch: Dict[Type[Any], Callable[[Any], None]] = {
            m.Request: self._requests.append,
            m.Response: self._on_response,
            m.Ping: self._on_ping,
            m.Pong: self._ignore,
            m.Reply: self._on_reply,
            m.McastSent: self._on_mcast_sent,
            m.Terminate: self._on_terminate,
            m.ErrorFrame: self._on_error,
            m.Welcome: self._on_welcome,
        }

        tls = _tls_options(tls_ca, tls_cert, tls_key) if address.startswith("tcp://") else None
        self._sock = _connect(address, connect_timeout, tls)
        if tls is not None:
            import ssl

            self._tls_not_ready = (ssl.SSLWantReadError, ssl.SSLWantWriteError)
            # The C loop reads and writes the file descriptor itself, which
            # would bypass the TLS layer: poll runs the Python loop (the codec
            # stays in C).
            self._serve = None
        try:
            self._handshake(token, prefix or "", window, connect_timeout)
        except BaseException:
            self._abort()
            raise

    # ---- session -------------------------------------------------------

    def _handshake(self, token: str, prefix: str, window: int, timeout: float) -> None:
        self._queue(self._encode(m.Hello(PROTOCOL_VERSION, window, self.thread_index, token, prefix)))
        deadline = time.monotonic() + timeout
        while self._welcome is None:
            self._wait_once(deadline, "WELCOME")
        welcome = self._welcome
        if welcome.version != PROTOCOL_VERSION:
            raise CumuloError(Status.UNSUPPORTED_VERSION,
                              "the core speaks protocol version %d" % welcome.version)
        self._max_frame = welcome.max_frame
        self._recv_limit = min(0xFFFFFFFF, welcome.max_frame + REQUEST_OVERHEAD)
        self._tid_suffix = _NODE_INSTANCE_BE.pack(welcome.node_id, welcome.instance_id)

    def _on_welcome(self, welcome: m.Welcome) -> None:
        if self._welcome is not None:
            raise self._fail(Status.PROTOCOL, "a second WELCOME from the core")
        self._welcome = welcome

    def _on_response(self, response: m.Response) -> None:
        self._responses[response.trans_id] = response

    def _on_ping(self, ping: m.Ping) -> None:
        self._out.append(self._encode_pong(ping.nonce))

    def _ignore(self, _: Any) -> None:
        pass

    def _on_reply(self, reply: m.Reply) -> None:
        self._replies[reply.req_id] = reply

    def _on_mcast_sent(self, sent: m.McastSent) -> None:
        self._mcast_sent[sent.trans_id] = sent

    def _on_terminate(self, _: m.Terminate) -> None:
        self._terminated = True

    def _on_error(self, error: m.ErrorFrame) -> None:
        raise self._fail(error.status, error.message)

    def _fail(self, status: int, message: str) -> CumuloError:
        """Close the connection; the caller raises the returned error."""
        self._abort()
        return CumuloError(status, message)

    def _abort(self) -> None:
        if not self._closed:
            self._closed = True
            self._sock.close()

    def close(self) -> None:
        """Say GOODBYE (after sending anything still queued) and close."""
        if self._closed:
            return
        try:
            self._out.append(self._encode(m.Goodbye()))
            self._flush()
        except (OSError, CumuloError):
            pass
        self._abort()

    def __enter__(self) -> "API":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    # ---- reading and writing -------------------------------------------

    def _queue(self, frame: bytes) -> None:
        """Queue a frame for the next write, refusing one over the core's limit."""
        if len(frame) - 4 > self._max_frame:
            raise CumuloError(Status.TOO_LARGE, "frame of %d bytes is over the core's limit of %d"
                              % (len(frame) - 4, self._max_frame))
        self._out.append(frame)

    def _send_now(self, frame: bytes) -> None:
        """Queue a frame; write at once unless handlers are running (then the batch goes together)."""
        self._queue(frame)
        if not self._in_handlers:
            self._flush()

    def _flush(self) -> None:
        if not self._out:
            return
        if self._closed:
            raise ConnectionClosed("the connection is closed")
        data = self._out[0] if len(self._out) == 1 else b"".join(self._out)
        self._out.clear()
        self._set_timeout(None)
        try:
            self._sock.sendall(data)
        except OSError as exc:
            self._abort()
            raise ConnectionClosed("write to the core failed: %s" % exc) from None

    def _set_timeout(self, timeout: Optional[float]) -> None:
        if timeout != self._timeout:
            self._sock.settimeout(timeout)
            self._timeout = timeout

    def _receive(self, timeout: Optional[float]) -> bool:
        """Read once (waiting up to ``timeout`` seconds) and dispatch the complete frames.

        Returns False if nothing arrived in time.
        """
        if self._closed:
            raise ConnectionClosed("the connection is closed")
        self._set_timeout(timeout)
        try:
            n = self._sock.recv_into(self._rview[self._rend:])
        except (socket.timeout, BlockingIOError):
            return False
        except self._tls_not_ready:  # TLS with timeout 0: no whole record yet
            return False
        except OSError as exc:
            self._abort()
            raise ConnectionClosed("read from the core failed: %s" % exc) from None
        if n == 0:
            self._abort()
            raise ConnectionClosed()
        self._rend += n
        try:
            frames, self._rstart = self._decode_frames(self._rbuf, self._rstart, self._rend, self._recv_limit)
        except DecodeError:
            self._abort()
            raise
        self._make_room()
        dispatch = self._dispatch
        for frame in frames:
            handler = dispatch.get(type(frame))
            if handler is None:
                self._unexpected(frame)
            handler(frame)
        return True

    def _unexpected(self, frame: m.Message) -> NoReturn:
        raise self._fail(Status.PROTOCOL, "unexpected %s from the core" % m.NAMES[m.TYPE_OF[type(frame)]])

    def _make_room(self) -> None:
        """Make sure the partial frame at the buffer's end can be completed."""
        start, end = self._rstart, self._rend
        if start == end:
            self._rstart = self._rend = 0
            if len(self._rbuf) > 16 * READ_SIZE:  # a huge frame has gone; give back the memory
                self._resize(READ_SIZE)
            return
        needed = READ_SIZE
        if end - start >= 4:
            length = int.from_bytes(self._rview[start:start + 4], "little")
            needed = max(needed, 4 + length)  # decode_frames checked it against the limit
        if len(self._rbuf) - start >= needed:
            return
        if needed > len(self._rbuf):
            self._resize(needed)
        else:
            pending = bytes(self._rview[start:end])
            self._rbuf[:len(pending)] = pending
            self._rstart, self._rend = 0, len(pending)

    def _resize(self, size: int) -> None:
        pending = bytes(self._rview[self._rstart:self._rend])
        self._rview.release()
        self._rbuf = bytearray(max(size, len(pending)))
        self._rbuf[:len(pending)] = pending
        self._rview = memoryview(self._rbuf)
        self._rstart, self._rend = 0, len(pending)

    def _wait_once(self, deadline: Optional[float], what: str) -> None:
        """Flush, then read once; raise TIMEOUT if ``deadline`` passes first."""
        self._flush()
        if deadline is None:
            self._receive(None)
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not self._receive(remaining):
            if time.monotonic() >= deadline:
                raise CumuloError(Status.TIMEOUT, "no %s from the core in time" % what)

    def _deadline(self, timeout_ms: int) -> float:
        return time.monotonic() + (timeout_ms + LOCAL_GRACE_MS + 3 * self.keepalive) / 1000.0

    # ---- requests to this instance -------------------------------------

    def poll(self, timeout: Optional[int] = None) -> bool:
        """Serve requests: read frames, run handlers, answer PING, keep RESPONSEs.

        Returns False once TERMINATE has arrived (after serving the requests
        already received), True when ``timeout`` ms pass; None waits forever.
        """
        if self._serve is not None:  # the C loop, same steps as below
            return self._serve(self, timeout)
        deadline = None if timeout is None else time.monotonic() + timeout / 1000.0
        while True:
            if self._requests:
                self._run_handlers()
            if self._terminated:
                self._flush()
                return False
            self._flush()
            if deadline is None:
                self._receive(None)
            else:
                remaining = deadline - time.monotonic()
                if not self._receive(max(0.0, remaining)) or remaining <= 0:
                    if not self._requests and not self._terminated:
                        return True

    def _run_handlers(self) -> None:
        self._in_handlers = True
        try:
            while self._requests:
                self._handle(self._requests.popleft())
        finally:
            self._in_handlers = False

    def _enter_trace(self, request_info: bytes) -> Optional[bytes]:
        """The C serve loop's way in: the trace context of the request whose
        handler it runs is set; the one it replaces is returned, to be put back."""
        previous = self._trace
        self._trace = _trace_context(request_info)
        return previous

    def _handle(self, request: m.Request) -> None:
        handler = self._handlers.get(request.pattern)
        if handler is None:
            self._no_handler(request)
            return
        previous = self._trace
        self._trace = _trace_context(request.request_info) if request.request_info else None
        try:
            result = handler(self, request)
        except Exception as exc:
            if self._closed:
                raise
            self._handler_failed(request, exc)
            return
        finally:
            self._trace = previous
        self._finish(request, result)

    # _no_handler, _handler_failed and _finish are also the C serve loop's
    # way back for everything but the common case (codec.serve).

    def _no_handler(self, request: m.Request) -> None:
        self._answer(request, Status.NO_SERVICE, b"", b"no handler for pattern %s"
                     % request.pattern.encode("utf-8"))

    def _handler_failed(self, request: m.Request, exc: Exception) -> None:
        log.error("handler for %s raised", request.name, exc_info=exc)
        text = "handler raised %s" % type(exc).__name__
        if str(exc):
            text += ": %s" % exc
        self._answer(request, Status.SERVICE_ERROR, b"", text.encode("utf-8", "replace"))

    def _finish(self, request: m.Request, result: HandlerResult) -> None:
        """Answer with what the handler returned (nothing if it forwarded the request)."""
        if request.trans_id in self._forwarded:
            self._forwarded.discard(request.trans_id)
            return
        try:
            response_info, response = self._split_result(result)
        except (TypeError, ValueError) as exc:
            self._answer(request, Status.SERVICE_ERROR, b"", ("bad handler result: %s" % exc).encode())
            return
        self._answer(request, Status.OK, response_info, response)

    @staticmethod
    def _split_result(result: HandlerResult) -> Tuple[Bytes, Bytes]:
        if result is None:
            return b"", b""
        if isinstance(result, (bytes, bytearray, memoryview)):
            return b"", result
        if isinstance(result, tuple) and len(result) == 2:
            info, response = result
            if not isinstance(response, (bytes, bytearray, memoryview)):
                raise TypeError("the response is %s, not bytes" % type(response).__name__)
            if not isinstance(info, (bytes, bytearray, memoryview)):
                info = info_encode(info)
            return info, response
        raise TypeError("a handler returns bytes, (response_info, bytes) or None, not %s"
                        % type(result).__name__)

    def _answer(self, request: m.Request, status: int, info: Bytes, response: Bytes) -> None:
        frame = self._encode_return(request.trans_id, status, info, response)
        if len(frame) - 4 > self._max_frame:
            message = b"response of %d bytes is over the limit of %d" % (len(frame) - 4, self._max_frame)
            frame = self._encode_return(request.trans_id, Status.TOO_LARGE, b"", message)
        self._out.append(frame)

    def forward(
        self,
        request: m.Request,
        name: str,
        request_info: Optional[Bytes] = None,
        request_bytes: Optional[Bytes] = None,
        timeout: Optional[int] = None,
        priority: Optional[int] = None,
    ) -> None:
        """Pass ``request`` (being handled now) to ``name``; the handler then returns None."""
        if request_info is None:
            request_info = request.request_info
        if self._trace is not None:
            request_info = _with_trace(request_info, self._trace)
        self._send_now(self._encode_send(
            m.FORWARD, request.trans_id,
            request.timeout if timeout is None else timeout,
            request.priority if priority is None else priority,
            0, name, request_info,
            request.request if request_bytes is None else request_bytes,
        ))
        self._forwarded.add(request.trans_id)

    # ---- subscriptions -------------------------------------------------

    def _control(self, frame_class: Any, pattern: str) -> int:
        self._last_req_id = (self._last_req_id + 1) & 0xFFFFFFFF
        req_id = self._last_req_id
        self._send_now(self._encode(frame_class(req_id, pattern)))
        deadline = self._deadline(self.timeout_sync)
        while req_id not in self._replies:
            self._wait_once(deadline, "REPLY")
        reply = self._replies.pop(req_id)
        if reply.status != Status.OK:
            raise CumuloError(reply.status, reply.message)
        return reply.value

    def subscribe(self, pattern: str, handler: Handler) -> None:
        """Subscribe ``prefix + pattern``; ``handler(api, request)`` answers its requests."""
        if not callable(handler):
            raise TypeError("handler must be callable")
        self._control(m.Subscribe, pattern)
        full = self.prefix + pattern
        self._handlers[full] = handler
        self._subscriptions[full] = self._subscriptions.get(full, 0) + 1

    def unsubscribe(self, pattern: str) -> None:
        """Remove one subscription of ``pattern`` (its handler goes with the last one)."""
        self._control(m.Unsubscribe, pattern)
        full = self.prefix + pattern
        left = self._subscriptions.get(full, 0) - 1
        if left > 0:
            self._subscriptions[full] = left
        else:
            self._subscriptions.pop(full, None)
            self._handlers.pop(full, None)

    def subscribe_count(self, pattern: str) -> int:
        """How many times this instance has subscribed ``pattern``."""
        return self._control(m.SubscribeCount, pattern)

    # ---- requests from this instance -----------------------------------

    def new_trans_id(self) -> bytes:
        """A fresh trans_id (PROTOCOL.md 2.2): time, node_id, instance_id."""
        now = time.time_ns()
        if now <= self._last_time_ns:
            now = self._last_time_ns + 1
        self._last_time_ns = now
        return _TIME_BE.pack(now) + self._tid_suffix

    def _send(self, frame_type: int, name: str, request: Bytes, request_info: Bytes,
              timeout: Optional[int], priority: Optional[int], wait_for_service: bool) -> bytes:
        trans_id = self.new_trans_id()
        if self._trace is not None:
            request_info = _with_trace(request_info, self._trace)
        self._send_now(self._encode_send(
            frame_type, trans_id, 0 if timeout is None else timeout,
            self.priority_default if priority is None else priority,
            m.FLAG_WAIT_FOR_SERVICE if wait_for_service else 0,
            name, request_info, request,
        ))
        return trans_id

    def send_async(self, name: str, request: Bytes, request_info: Bytes = b"",
                   timeout: Optional[int] = None, priority: Optional[int] = None,
                   wait_for_service: bool = False) -> bytes:
        """Send a request; returns its trans_id (collect the answer with ``recv_async``).

        ``timeout`` None or 0 means the service's ``timeout_async``.
        """
        return self._send(m.SEND_ASYNC, name, request, request_info, timeout, priority, wait_for_service)

    def send_sync(self, name: str, request: Bytes, request_info: Bytes = b"",
                  timeout: Optional[int] = None, priority: Optional[int] = None,
                  wait_for_service: bool = False) -> Tuple[bytes, bytes]:
        """Send a request and wait for its answer: returns (response_info, response).

        Raises ``CumuloError`` with the status (TIMEOUT, NO_SERVICE,
        SERVICE_ERROR, ...) and message if the request failed.
        """
        trans_id = self._send(m.SEND_SYNC, name, request, request_info, timeout, priority, wait_for_service)
        deadline = self._deadline(timeout or self.timeout_sync)
        while trans_id not in self._responses:
            self._wait_once(deadline, "RESPONSE to %s" % name)
        response = self._responses.pop(trans_id)
        if response.status != Status.OK:
            raise CumuloError(response.status, response.response.decode("utf-8", "replace"),
                              trans_id=trans_id, response_info=response.response_info)
        return response.response_info, response.response

    def mcast_async(self, name: str, request: Bytes, request_info: Bytes = b"",
                    timeout: Optional[int] = None, priority: Optional[int] = None,
                    wait_for_service: bool = False) -> List[bytes]:
        """Send a copy to every matching subscriber; returns the copies' trans_ids."""
        trans_id = self._send(m.MCAST_ASYNC, name, request, request_info, timeout, priority, wait_for_service)
        deadline = self._deadline(self.timeout_sync)
        while trans_id not in self._mcast_sent:
            if trans_id in self._responses:  # the core refused the call itself
                response = self._responses.pop(trans_id)
                raise CumuloError(response.status, response.response.decode("utf-8", "replace"),
                                  trans_id=trans_id)
            self._wait_once(deadline, "MCAST_SENT")
        return list(self._mcast_sent.pop(trans_id).trans_ids)

    def recv_async(self, trans_id: Optional[bytes] = None, timeout: Optional[int] = None) -> m.Response:
        """The RESPONSE of ``trans_id``, or the oldest one not collected yet.

        Returns the Response whatever its status. Raises ``CumuloError``
        TIMEOUT if none arrives within ``timeout`` ms (default: the
        service's timeout_async and a margin for the core's own TIMEOUT).
        """
        if timeout is None:
            deadline = self._deadline(self.timeout_async)
        else:
            deadline = time.monotonic() + timeout / 1000.0
        while True:
            if trans_id is None:
                if self._responses:
                    return self._responses.pop(next(iter(self._responses)))
            elif trans_id in self._responses:
                return self._responses.pop(trans_id)
            self._wait_once(deadline, "RESPONSE")

    def ping(self, nonce: int = 0) -> None:
        """Send PING to the core (it answers PONG, which is read and dropped)."""
        self._send_now(self._encode(m.Ping(nonce)))

    # ---- key/value helpers (also module functions of cumulo) -----------

    info_encode = staticmethod(info_encode)
    info_parse = staticmethod(info_parse)
    info_dict = staticmethod(info_dict)

    # ---- what WELCOME said ---------------------------------------------

    @property
    def welcome(self) -> m.Welcome:
        assert self._welcome is not None
        return self._welcome

    @property
    def node_id(self) -> int:
        return self.welcome.node_id

    @property
    def instance_id(self) -> int:
        return self.welcome.instance_id

    @property
    def process_index(self) -> int:
        return self.welcome.process_index

    @property
    def process_count(self) -> int:
        return self.welcome.process_count

    @property
    def thread_count(self) -> int:
        return self.welcome.thread_count

    @property
    def prefix(self) -> str:
        return self.welcome.prefix

    @property
    def window(self) -> int:
        return self.welcome.window

    @property
    def max_frame(self) -> int:
        return self.welcome.max_frame

    @property
    def timeout_async(self) -> int:
        return self.welcome.timeout_async

    @property
    def timeout_sync(self) -> int:
        return self.welcome.timeout_sync

    @property
    def timeout_terminate(self) -> int:
        return self.welcome.timeout_terminate

    @property
    def priority_default(self) -> int:
        return self.welcome.priority_default

    @property
    def keepalive(self) -> int:
        return self.welcome.keepalive
