"""One immutable class per frame of PROTOCOL.md section 4, fields in wire order.

``LAYOUTS`` maps each type code to its class and a layout string, the single
description of the wire format that both codec implementations are built from:

====  ======================================================
``B``  u8            ``b``  i8
``H``  u16           ``I``  u32
``Q``  u64           ``t``  tid (16 raw bytes)
``s``  str (u16 length + UTF-8)
``y``  bytes (u32 length + raw bytes)
``T``  u32 count + count tids (a tuple of 16-byte ``bytes``)
====  ======================================================
"""

from __future__ import annotations

from typing import Dict, NamedTuple, Tuple, Type, Union

# Type codes, instance -> core.
HELLO = 0x01
SUBSCRIBE = 0x02
UNSUBSCRIBE = 0x03
SUBSCRIBE_COUNT = 0x04
SEND_ASYNC = 0x10
SEND_SYNC = 0x11
MCAST_ASYNC = 0x12
RETURN = 0x20
FORWARD = 0x21
# Both directions.
PING = 0x30
PONG = 0x31
GOODBYE = 0x32
# Core -> instance.
WELCOME = 0x81
REQUEST = 0x82
RESPONSE = 0x83
REPLY = 0x84
MCAST_SENT = 0x85
TERMINATE = 0x86
ERROR = 0x87

# Bits of SEND_*.flags and REQUEST.flags.
FLAG_WAIT_FOR_SERVICE = 0x01
FLAG_SYNC = 0x01
FLAG_MCAST = 0x02


class Hello(NamedTuple):
    version: int
    window: int
    thread_index: int
    token: str
    prefix: str


class Subscribe(NamedTuple):
    req_id: int
    pattern: str


class Unsubscribe(NamedTuple):
    req_id: int
    pattern: str


class SubscribeCount(NamedTuple):
    req_id: int
    pattern: str


class SendAsync(NamedTuple):
    trans_id: bytes
    timeout: int
    priority: int
    flags: int
    name: str
    request_info: bytes
    request: bytes


class SendSync(NamedTuple):
    trans_id: bytes
    timeout: int
    priority: int
    flags: int
    name: str
    request_info: bytes
    request: bytes


class McastAsync(NamedTuple):
    trans_id: bytes
    timeout: int
    priority: int
    flags: int
    name: str
    request_info: bytes
    request: bytes


class Forward(NamedTuple):
    trans_id: bytes
    timeout: int
    priority: int
    flags: int
    name: str
    request_info: bytes
    request: bytes


class Return(NamedTuple):
    trans_id: bytes
    status: int
    response_info: bytes
    response: bytes


class Ping(NamedTuple):
    nonce: int


class Pong(NamedTuple):
    nonce: int


class Goodbye(NamedTuple):
    pass


class Welcome(NamedTuple):
    version: int
    node_id: int
    instance_id: int
    process_index: int
    process_count: int
    thread_count: int
    window: int
    max_frame: int
    timeout_async: int
    timeout_sync: int
    timeout_terminate: int
    priority_default: int
    keepalive: int
    prefix: str


class Request(NamedTuple):
    """A request delivered to this instance; what handlers receive."""

    trans_id: bytes
    timeout: int
    priority: int
    flags: int
    source: int
    name: str
    pattern: str
    request_info: bytes
    request: bytes

    @property
    def sync(self) -> bool:
        """True if the sender used ``send_sync``."""
        return bool(self.flags & FLAG_SYNC)

    @property
    def mcast(self) -> bool:
        """True if this is a multicast copy."""
        return bool(self.flags & FLAG_MCAST)


class Response(NamedTuple):
    trans_id: bytes
    status: int
    response_info: bytes
    response: bytes


class Reply(NamedTuple):
    req_id: int
    status: int
    value: int
    message: str


class McastSent(NamedTuple):
    trans_id: bytes
    trans_ids: Tuple[bytes, ...]


class Terminate(NamedTuple):
    timeout: int


class ErrorFrame(NamedTuple):
    status: int
    message: str


Message = Union[
    Hello, Subscribe, Unsubscribe, SubscribeCount, SendAsync, SendSync, McastAsync,
    Forward, Return, Ping, Pong, Goodbye, Welcome, Request, Response, Reply,
    McastSent, Terminate, ErrorFrame,
]

_SEND_LAYOUT = "tIbBsyy"

LAYOUTS: Dict[int, Tuple[Type[Message], str]] = {
    HELLO: (Hello, "HIIss"),
    SUBSCRIBE: (Subscribe, "Is"),
    UNSUBSCRIBE: (Unsubscribe, "Is"),
    SUBSCRIBE_COUNT: (SubscribeCount, "Is"),
    SEND_ASYNC: (SendAsync, _SEND_LAYOUT),
    SEND_SYNC: (SendSync, _SEND_LAYOUT),
    MCAST_ASYNC: (McastAsync, _SEND_LAYOUT),
    FORWARD: (Forward, _SEND_LAYOUT),
    RETURN: (Return, "tHyy"),
    PING: (Ping, "Q"),
    PONG: (Pong, "Q"),
    GOODBYE: (Goodbye, ""),
    WELCOME: (Welcome, "HIIIIIIIIIIbIs"),
    REQUEST: (Request, "tIbBQssyy"),
    RESPONSE: (Response, "tHyy"),
    REPLY: (Reply, "IHIs"),
    MCAST_SENT: (McastSent, "tT"),
    TERMINATE: (Terminate, "I"),
    ERROR: (ErrorFrame, "Hs"),
}

#: The code of each frame class.
TYPE_OF: Dict[type, int] = {cls: code for code, (cls, _) in LAYOUTS.items()}

#: Frame names as PROTOCOL.md spells them, e.g. ``"SEND_ASYNC"``.
NAMES: Dict[int, str] = {
    HELLO: "HELLO", SUBSCRIBE: "SUBSCRIBE", UNSUBSCRIBE: "UNSUBSCRIBE",
    SUBSCRIBE_COUNT: "SUBSCRIBE_COUNT", SEND_ASYNC: "SEND_ASYNC", SEND_SYNC: "SEND_SYNC",
    MCAST_ASYNC: "MCAST_ASYNC", RETURN: "RETURN", FORWARD: "FORWARD", PING: "PING",
    PONG: "PONG", GOODBYE: "GOODBYE", WELCOME: "WELCOME", REQUEST: "REQUEST",
    RESPONSE: "RESPONSE", REPLY: "REPLY", MCAST_SENT: "MCAST_SENT",
    TERMINATE: "TERMINATE", ERROR: "ERROR",
}
