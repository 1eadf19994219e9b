"""The frame codec seam.

Both implementations export the functions named in ``SEAM`` with the same
behaviour: ``cumulo._ccodec`` (C extension, optional) is used when it can be
imported, else ``cumulo._pycodec``. ``CUMULO_PURE_PYTHON=1`` forces pure Python.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any, Callable, Optional

from . import _pycodec

SEAM = ("decode_frames", "decode_frame", "encode", "encode_return", "encode_send", "encode_pong", "serve")


def _select() -> ModuleType:
    if os.environ.get("CUMULO_PURE_PYTHON", "") not in ("", "0"):
        return _pycodec
    try:
        from . import _ccodec
    except ImportError:
        return _pycodec
    return _ccodec


_impl = _select()

#: True when the C extension is the active codec.
ACCELERATED: bool = _impl is not _pycodec

# Typed after the pure-Python functions; the C ones have the same signatures.
decode_frames = _pycodec.decode_frames
decode_frame = _pycodec.decode_frame
encode = _pycodec.encode
encode_return = _pycodec.encode_return
encode_send = _pycodec.encode_send
encode_pong = _pycodec.encode_pong
# API.poll's loop in C, or None: API.poll then runs its own Python loop.
serve: Optional[Callable[[Any, Optional[int]], bool]] = _pycodec.serve
if ACCELERATED:
    decode_frames = _impl.decode_frames
    decode_frame = _impl.decode_frame
    encode = _impl.encode
    encode_return = _impl.encode_return
    encode_send = _impl.encode_send
    encode_pong = _impl.encode_pong
    serve = _impl.serve

#: The C key/value parser (cumulo.info uses it when ACCELERATED), else None.
info_parse_c: Optional[Callable[[Any], Any]] = getattr(_impl, "info_parse", None) if ACCELERATED else None


def implementation() -> str:
    """``"c"`` or ``"python"``: which codec is active."""
    return "c" if ACCELERATED else "python"
