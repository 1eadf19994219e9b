"""Status codes (PROTOCOL.md 2.3) and the exceptions that carry them."""

from __future__ import annotations

from enum import IntEnum
from typing import Optional


class Status(IntEnum):
    """A protocol status code. Unknown codes become pseudo-members named ``UNKNOWN_<n>``."""

    OK = 0
    TIMEOUT = 1
    NO_SERVICE = 2
    QUEUE_FULL = 3
    CRASHED = 4
    MALFORMED = 5
    SHUTTING_DOWN = 6
    SERVICE_ERROR = 7
    TOO_LARGE = 8
    INVALID_ARGUMENT = 9
    UNSUPPORTED_VERSION = 10
    UNAUTHORIZED = 11
    PROTOCOL = 12
    UNAVAILABLE = 13

    @classmethod
    def _missing_(cls, value: object) -> Optional["Status"]:
        # The protocol says receivers must accept codes they do not know.
        if isinstance(value, int) and 0 <= value <= 0xFFFF:
            member = int.__new__(cls, value)
            member._name_ = "UNKNOWN_%d" % value
            member._value_ = value
            return member
        return None


class CumuloError(Exception):
    """An error reported by the core or detected by the SDK, with its status code."""

    status: Status
    message: str
    #: For a failed send: the request's trans_id and the response_info that came back.
    trans_id: Optional[bytes]
    response_info: bytes

    def __init__(
        self,
        status: int,
        message: str,
        *,
        trans_id: Optional[bytes] = None,
        response_info: bytes = b"",
    ) -> None:
        super().__init__(status, message)
        self.status = Status(status)
        self.message = message
        self.trans_id = trans_id
        self.response_info = response_info

    def __str__(self) -> str:
        return "%s: %s" % (self.status.name, self.message)


class DecodeError(CumuloError, ValueError):
    """Bytes that are not a valid frame or key/value buffer (MALFORMED or TOO_LARGE)."""

    def __init__(self, message: str, status: int = Status.MALFORMED) -> None:
        super().__init__(status, message)


class ConnectionClosed(CumuloError):
    """The connection to the core ended."""

    def __init__(self, message: str = "connection closed by the core") -> None:
        super().__init__(Status.SHUTTING_DOWN, message)
