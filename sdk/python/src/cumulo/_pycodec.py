"""Pure-Python frame codec (PROTOCOL.md sections 2 and 4).

Generic encoders/decoders are compiled once per layout of ``messages.LAYOUTS``:
consecutive fixed-width fields, plus the length prefix of the variable field
after them, are read or written by one precompiled ``struct.Struct``. The
frames on the hot path (REQUEST and RESPONSE decode, RETURN and SEND encode)
have hand-written versions. Decoding works on a memoryview of the caller's
buffer; only the fields handed out (bytes, str) are copied.
"""

from __future__ import annotations

import struct
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from . import messages as m
from .errors import DecodeError, Status

Buffer = Union[bytes, bytearray, memoryview]
# A decoder reads a frame body from ``raw`` (bytes or bytearray: sliced for str
# fields, which is the fastest way to decode them) and ``mv``, a memoryview of
# it (sliced for bytes fields: one copy).
Decoder = Callable[[Union[bytes, bytearray], memoryview, int, int], m.Message]

NO_LIMIT = 0xFFFFFFFF

# Frame classes are tuple subclasses without __init__: fill them directly.
_new = tuple.__new__

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_HEADER = struct.Struct("<IB")
_TID = 16

# struct codes of the fixed-width layout letters.
_FIXED = {"B": "B", "b": "b", "H": "H", "I": "I", "Q": "Q", "t": "16s"}
# struct code of the length prefix of each variable-width letter.
_PREFIX = {"s": "H", "y": "I", "T": "I"}


def _truncated(what: str) -> DecodeError:
    return DecodeError("frame body ends inside %s" % what)


def _decode_utf8(raw: Union[bytes, bytearray], start: int, end: int) -> str:
    try:
        return raw[start:end].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError("invalid UTF-8 in a str field: %s" % exc.reason) from None


# A step reads or writes ``n_fixed`` fixed-width fields and then, if ``var``
# is set, the variable field whose length prefix ends the same struct.
_Step = Tuple[struct.Struct, int, str]


def _compile_steps(layout: str) -> List[_Step]:
    steps: List[_Step] = []
    run = "<"
    n_fixed = 0
    for letter in layout:
        if letter in _FIXED:
            run += _FIXED[letter]
            n_fixed += 1
        else:
            steps.append((struct.Struct(run + _PREFIX[letter]), n_fixed, letter))
            run = "<"
            n_fixed = 0
    if n_fixed or not steps:
        steps.append((struct.Struct(run), n_fixed, ""))
    return steps


def _check_tid(value: Any) -> None:
    if not isinstance(value, (bytes, bytearray, memoryview)) or len(value) != _TID:
        raise ValueError("a trans_id is 16 bytes, got %r" % (value,))


def _make_decoder(cls: Any, layout: str) -> Decoder:
    steps = _compile_steps(layout)
    def decode(raw: Union[bytes, bytearray], mv: memoryview, pos: int, end: int) -> m.Message:
        values: List[Any] = []
        for head, _, var in steps:
            if pos + head.size > end:
                raise _truncated("a fixed-width field")
            fields = head.unpack_from(mv, pos)
            pos += head.size
            if not var:
                values.extend(fields)
                continue
            values.extend(fields[:-1])
            count = fields[-1]
            size = count * _TID if var == "T" else count
            if pos + size > end:
                raise _truncated("a variable-length field")
            if var == "s":
                values.append(_decode_utf8(raw, pos, pos + size))
            elif var == "y":
                values.append(mv[pos:pos + size].tobytes())
            else:
                values.append(tuple(mv[i:i + _TID].tobytes() for i in range(pos, pos + size, _TID)))
            pos += size
        if pos != end:
            raise DecodeError("%d trailing bytes after the frame's fields" % (end - pos))
        return _new(cls, values)  # type: ignore[no-any-return]

    return decode


_REQUEST_HEAD = struct.Struct("<16sIbBQH")
_RESPONSE_HEAD = struct.Struct("<16sHI")


def _decode_request(raw: Union[bytes, bytearray], mv: memoryview, pos: int, end: int) -> m.Request:
    if pos + 32 > end:
        raise _truncated("REQUEST's fixed fields")
    trans_id, timeout, priority, flags, source, n = _REQUEST_HEAD.unpack_from(mv, pos)
    pos += 32
    if pos + n + 2 > end:
        raise _truncated("REQUEST.name")
    name = _decode_utf8(raw, pos, pos + n)
    pos += n
    (n,) = _U16.unpack_from(mv, pos)
    pos += 2
    if pos + n + 4 > end:
        raise _truncated("REQUEST.pattern")
    pattern = _decode_utf8(raw, pos, pos + n)
    pos += n
    (n,) = _U32.unpack_from(mv, pos)
    pos += 4
    if pos + n + 4 > end:
        raise _truncated("REQUEST.request_info")
    request_info = mv[pos:pos + n].tobytes()
    pos += n
    (n,) = _U32.unpack_from(mv, pos)
    pos += 4
    if pos + n != end:
        raise DecodeError("REQUEST.request does not end with the frame")
    return _new(m.Request, (trans_id, timeout, priority, flags, source, name, pattern,
                            request_info, mv[pos:end].tobytes()))


def _decode_response(raw: Union[bytes, bytearray], mv: memoryview, pos: int, end: int) -> m.Response:
    if pos + 22 > end:
        raise _truncated("RESPONSE's fixed fields")
    trans_id, status, n = _RESPONSE_HEAD.unpack_from(mv, pos)
    pos += 22
    if pos + n + 4 > end:
        raise _truncated("RESPONSE.response_info")
    response_info = mv[pos:pos + n].tobytes()
    pos += n
    (n,) = _U32.unpack_from(mv, pos)
    pos += 4
    if pos + n != end:
        raise DecodeError("RESPONSE.response does not end with the frame")
    return _new(m.Response, (trans_id, status, response_info, mv[pos:end].tobytes()))


_DECODERS: Dict[int, Decoder] = {
    code: _make_decoder(cls, layout) for code, (cls, layout) in m.LAYOUTS.items()
}
_DECODERS[m.REQUEST] = _decode_request
_DECODERS[m.RESPONSE] = _decode_response


def decode_frames(buf: Buffer, start: int, end: int, max_frame: int) -> Tuple[List[m.Message], int]:
    """Decode every complete frame in ``buf[start:end]``.

    Returns the frames and the offset just after the last complete one; a
    partial frame at the end is left for the next call. A length over
    ``max_frame`` is refused as soon as its 4 bytes are there.
    """
    frames: List[m.Message] = []
    pos = start
    raw = buf if isinstance(buf, (bytes, bytearray)) else bytes(buf)
    with memoryview(raw) as mv:
        if end > len(mv) or start < 0 or start > end:
            raise ValueError("start/end outside the buffer")
        while end - pos >= 4:
            (length,) = _U32.unpack_from(mv, pos)
            if length > max_frame:
                raise DecodeError("frame of %d bytes is over the limit of %d" % (length, max_frame),
                                  Status.TOO_LARGE)
            if length == 0:
                raise DecodeError("frame length 0 (the type byte is missing)")
            if end - pos - 4 < length:
                break
            decoder = _DECODERS.get(mv[pos + 4])
            if decoder is None:
                raise DecodeError("unknown frame type 0x%02x" % mv[pos + 4])
            frames.append(decoder(raw, mv, pos + 5, pos + 4 + length))
            pos += 4 + length
    return frames, pos


def decode_frame(data: Buffer, max_frame: Optional[int] = None) -> m.Message:
    """Decode ``data``, which must hold exactly one whole frame."""
    size = len(data)
    frames, pos = decode_frames(data, 0, size, NO_LIMIT if max_frame is None else max_frame)
    if not frames:
        raise DecodeError("incomplete frame (%d bytes)" % size)
    if pos != size:
        raise DecodeError("%d bytes after the frame" % (size - pos))
    return frames[0]


def _make_encoder(code: int, layout: str) -> Callable[[Sequence[Any]], bytes]:
    steps = _compile_steps(layout)
    tid_positions = [i for i, letter in enumerate(layout) if letter == "t"]

    def encode(fields: Sequence[Any]) -> bytes:
        if len(fields) != len(layout):
            raise ValueError("%s has %d fields, got %d" % (m.NAMES[code], len(layout), len(fields)))
        for i in tid_positions:
            _check_tid(fields[i])
        parts: List[Any] = [b""]
        index = 0
        for head, n_fixed, var in steps:
            values = list(fields[index:index + n_fixed])
            index += n_fixed
            if not var:
                parts.append(head.pack(*values))
                continue
            value = fields[index]
            index += 1
            if var == "s":
                if not isinstance(value, str):
                    raise TypeError("a str field needs str, got %s" % type(value).__name__)
                data: Any = value.encode("utf-8")
                values.append(len(data))
            elif var == "y":
                data = value
                values.append(len(memoryview(data)))
            else:
                for tid in value:
                    _check_tid(tid)
                data = b"".join(value)
                values.append(len(value))
            parts.append(head.pack(*values))
            parts.append(data)
        parts[0] = _HEADER.pack(1 + sum(len(part) for part in parts), code)
        return b"".join(parts)

    return encode


_ENCODERS: Dict[type, Callable[[Sequence[Any]], bytes]] = {
    cls: _make_encoder(code, layout) for code, (cls, layout) in m.LAYOUTS.items()
}


def _check_fields(exc: Exception) -> ValueError:
    return ValueError("field out of range for its wire type: %s" % exc)


def encode(message: m.Message) -> bytes:
    """Encode any frame object of ``cumulo.messages`` as a whole frame."""
    encoder = _ENCODERS.get(type(message))
    if encoder is None:
        raise TypeError("not a cumulo frame: %r" % (type(message).__name__,))
    try:
        return encoder(message)
    except (struct.error, OverflowError) as exc:
        raise _check_fields(exc) from None


_RETURN_HEAD = struct.Struct("<IB16sHI")
_SEND_HEAD = struct.Struct("<IB16sIbBH")


def encode_return(trans_id: bytes, status: int, response_info: Buffer, response: Buffer) -> bytes:
    """Encode RETURN without building a message object."""
    if len(trans_id) != _TID:
        raise ValueError("a trans_id is 16 bytes, got %d" % len(trans_id))
    n_info = len(response_info)
    n_response = len(response)
    length = 27 + n_info + n_response
    try:
        head = _RETURN_HEAD.pack(length, m.RETURN, trans_id, status, n_info)
        return b"".join((head, response_info, _U32.pack(n_response), response))
    except (struct.error, OverflowError) as exc:
        raise _check_fields(exc) from None


def encode_send(frame_type: int, trans_id: bytes, timeout: int, priority: int, flags: int,
                name: str, request_info: Buffer, request: Buffer) -> bytes:
    """Encode SEND_ASYNC, SEND_SYNC, MCAST_ASYNC or FORWARD without a message object."""
    if frame_type not in (m.SEND_ASYNC, m.SEND_SYNC, m.MCAST_ASYNC, m.FORWARD):
        raise ValueError("0x%02x is not a send frame type" % frame_type)
    if len(trans_id) != _TID:
        raise ValueError("a trans_id is 16 bytes, got %d" % len(trans_id))
    name_bytes = name.encode("utf-8")
    n_info = len(request_info)
    n_request = len(request)
    length = 33 + len(name_bytes) + n_info + n_request
    try:
        head = _SEND_HEAD.pack(length, frame_type, trans_id, timeout, priority, flags, len(name_bytes))
        return b"".join((head, name_bytes, _U32.pack(n_info), request_info,
                         _U32.pack(n_request), request))
    except (struct.error, OverflowError) as exc:
        raise _check_fields(exc) from None


_PING_PONG = struct.Struct("<IBQ")


def encode_pong(nonce: int) -> bytes:
    """Encode PONG (the answer to every PING)."""
    try:
        return _PING_PONG.pack(9, m.PONG, nonce)
    except struct.error as exc:
        raise _check_fields(exc) from None


#: The C codec's serve(api, timeout) runs API.poll's loop in C; in pure Python
#: there is none and API.poll runs its own loop.
serve = None
