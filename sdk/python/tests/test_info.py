"""Key/value helpers (PROTOCOL.md section 5)."""

from __future__ import annotations

import pytest

from cumulo import API, DecodeError, Status, info_dict, info_encode, info_parse


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


def test_parse_keeps_order_repeats_and_empties() -> None:
    data = b"a\x00\x00a\x002\x00\x00\x00"
    assert info_parse(data) == [(b"a", b""), (b"a", b"2"), (b"", b"")]
    assert info_parse(bytearray(data)) == info_parse(memoryview(data))
    assert info_encode(info_parse(data)) == data


@pytest.mark.parametrize("data", [b"\x00", b"a\x00b", b"a", b"a\x00b\x00c\x00", b"\x00\x00\x00"])
def test_parse_refuses_malformed(data: bytes) -> None:
    with pytest.raises(DecodeError) as caught:
        info_parse(data)
    assert caught.value.status is Status.MALFORMED


def test_info_dict_first_value_wins_and_needs_utf8() -> None:
    assert info_dict(b"a\x001\x00a\x002\x00b\x00\xc3\xa9\x00") == {"a": "1", "b": "\u00e9"}
    with pytest.raises(DecodeError):
        info_dict(b"a\x00\xff\x00")


def test_helpers_on_the_api_class() -> None:
    assert API.info_parse(API.info_encode({"x": "y"})) == [(b"x", b"y")]
