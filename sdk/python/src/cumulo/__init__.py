"""cumulo: the Python SDK of the cumulo service cloud (wire protocol v1)."""

from .api import API, Handler, HandlerResult
from .codec import ACCELERATED, implementation
from .errors import ConnectionClosed, CumuloError, DecodeError, Status
from .info import info_dict, info_encode, info_parse
from .messages import Request, Response
from .runner import run

__version__ = "0.1.0"

__all__ = [
    "ACCELERATED",
    "API",
    "ConnectionClosed",
    "CumuloError",
    "DecodeError",
    "Handler",
    "HandlerResult",
    "Request",
    "Response",
    "Status",
    "implementation",
    "info_dict",
    "info_encode",
    "info_parse",
    "run",
]
