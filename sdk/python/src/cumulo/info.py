"""Key/value metadata encoding (PROTOCOL.md section 5): ``key\\0value\\0...``."""

from __future__ import annotations

from typing import Iterable, List, Mapping, Tuple, Union

from . import codec
from .errors import DecodeError

#: A key or value: str (UTF-8 encoded) or bytes.
Field = Union[str, bytes, bytearray, memoryview]
Pairs = Union[
    Mapping[str, Field], Mapping[bytes, Field], Mapping[Union[str, bytes], Field],
    Iterable[Tuple[Field, Field]]]


def _as_field(value: Field) -> bytes:
    if isinstance(value, str):
        data = value.encode("utf-8")
    elif isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
    else:
        raise TypeError("a key/value field is str or bytes, not %s" % type(value).__name__)
    if b"\0" in data:
        raise ValueError("a key/value field cannot contain NUL: %r" % (value,))
    return data


def info_encode(pairs: Pairs) -> bytes:
    """Encode a mapping or an iterable of (key, value) pairs; str is UTF-8 encoded."""
    items: Iterable[Tuple[Field, Field]] = pairs.items() if isinstance(pairs, Mapping) else pairs
    fields: List[bytes] = []
    for key, value in items:
        fields.append(_as_field(key))
        fields.append(_as_field(value))
    if not fields:
        return b""
    fields.append(b"")  # the NUL after the last value
    return b"\0".join(fields)


def info_parse_python(data: Union[bytes, bytearray, memoryview]) -> List[Tuple[bytes, bytes]]:
    """Parse a key/value buffer into (key, value) pairs, in order, repeats kept.

    Raises ``DecodeError`` (MALFORMED) if the buffer does not end with NUL or
    holds an odd number of fields.
    """
    raw = bytes(data)
    if not raw:
        return []
    if raw[-1] != 0:
        raise DecodeError("key/value buffer does not end with NUL")
    fields = raw[:-1].split(b"\0")
    if len(fields) % 2:
        raise DecodeError("key/value buffer has a key without a value")
    return list(zip(fields[0::2], fields[1::2]))


#: Handlers call it on every request: the C extension's when it is active.
info_parse = info_parse_python
if codec.ACCELERATED:
    info_parse = codec.info_parse_c


def info_dict(data: Union[bytes, bytearray, memoryview]) -> dict[str, str]:
    """Parse into a dict of UTF-8 strings; for a repeated key the first value wins."""
    result: dict[str, str] = {}
    for key, value in info_parse(data):
        try:
            result.setdefault(key.decode("utf-8"), value.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise DecodeError("key/value field is not UTF-8: %s" % exc.reason) from None
    return result
