"""Key/value helpers (PROTOCOL.md section 5)."""

from __future__ import annotations

from typing import Any, Callable, List

import pytest
from conftest import C_CODEC

from cumulo import API, DecodeError, Status, codec, info, info_dict, info_encode, info_parse

# Each key/value parser: the pure-Python one and the C extension's.
PARSERS: List[Any] = [
    pytest.param(info.info_parse_python, id="python"),
    pytest.param(C_CODEC.info_parse, id="c") if C_CODEC is not None
    else pytest.param(None, id="c", marks=pytest.mark.skip(reason="cumulo._ccodec is not built")),
]


def test_encode_mapping_pairs_and_mixed_types() -> None:
    assert info_encode({}) == b""
    assert info_encode([]) == b""
    assert info_encode({"a": "1", b"b": b"2"}) == b"a\x001\x00b\x002\x00"  # type: ignore[arg-type]
    assert info_encode([("k", ""), ("k", "\u00e9")]) == b"k\x00\x00k\x00\xc3\xa9\x00"
    assert info_encode((pair for pair in [(bytearray(b"x"), memoryview(b"y"))])) == b"x\0y\0"


def test_encode_refuses_nul_and_other_types() -> None:
    with pytest.raises(ValueError, match="NUL"):
        info_encode({"a\0b": "c"})
    with pytest.raises(ValueError, match="NUL"):
        info_encode([("a", b"\0")])
    with pytest.raises(TypeError):
        info_encode([("a", 5)])  # type: ignore[list-item]


@pytest.mark.parametrize("parse", PARSERS)
def test_parse_keeps_order_repeats_and_empties(parse: Callable[[Any], Any]) -> None:
    data = b"a\x00\x00a\x002\x00\x00\x00"
    assert parse(data) == [(b"a", b""), (b"a", b"2"), (b"", b"")]
    assert parse(bytearray(data)) == parse(memoryview(data)) == parse(data)
    assert info_encode(parse(data)) == data
    assert parse(b"") == []
    big = info_encode([("k%d" % n, "v" * n) for n in range(300)])
    assert parse(big) == info.info_parse_python(big)
    assert all(type(k) is bytes and type(v) is bytes for k, v in parse(big))


@pytest.mark.parametrize("parse", PARSERS)
@pytest.mark.parametrize("data", [b"\x00", b"a\x00b", b"a", b"a\x00b\x00c\x00", b"\x00\x00\x00"])
def test_parse_refuses_malformed(parse: Callable[[Any], Any], data: bytes) -> None:
    with pytest.raises(DecodeError) as caught:
        parse(data)
    assert caught.value.status is Status.MALFORMED
    with pytest.raises(DecodeError, match=str(caught.value.message)):
        info.info_parse_python(data)  # the same words in both


@pytest.mark.parametrize("parse", PARSERS)
def test_parse_refuses_what_is_not_bytes(parse: Callable[[Any], Any]) -> None:
    with pytest.raises(TypeError):
        parse("a\x00b\x00")


def test_the_c_parser_is_the_public_one_when_accelerated() -> None:
    assert (info_parse is codec.info_parse_c) == codec.ACCELERATED


def test_info_dict_first_value_wins_and_needs_utf8() -> None:
    assert info_dict(b"a\x001\x00a\x002\x00b\x00\xc3\xa9\x00") == {"a": "1", "b": "\u00e9"}
    with pytest.raises(DecodeError):
        info_dict(b"a\x00\xff\x00")


def test_helpers_on_the_api_class() -> None:
    assert API.info_parse(API.info_encode({"x": "y"})) == [(b"x", b"y")]
