"""Every vector of proto/vectors decoded and re-encoded, every invalid one rejected."""

from __future__ import annotations

from types import ModuleType
from typing import Any, Dict, List, Tuple

import pytest
from conftest import load_vectors

from cumulo import DecodeError, Status, info_encode, info_parse, messages

VECTORS = load_vectors()
CLASS_BY_NAME = {name: messages.LAYOUTS[code][0] for code, name in messages.NAMES.items()}
INVALID_LIMIT = 1024  # PROTOCOL.md 8: TOO_LARGE vectors assume this limit


def _frame_cases() -> Tuple[List[Any], List[Any]]:
    valid, invalid = [], []
    for family, content in VECTORS.items():
        if family == "kv":
            continue
        for vector in content["vectors"]:
            valid.append(pytest.param(vector, id="%s/%s" % (family, vector["name"])))
        for vector in content.get("invalid", []):
            invalid.append(pytest.param(vector, id="%s/%s" % (family, vector["name"])))
    return valid, invalid


VALID, INVALID = _frame_cases()


def _layout_of(frame_type: str) -> Tuple[type, str]:
    code = next(code for code, name in messages.NAMES.items() if name == frame_type)
    return messages.LAYOUTS[code]


def _wire_value(letter: str, value: Any) -> Any:
    """A vector's JSON value as the codec represents it."""
    if letter in "ty":
        return bytes.fromhex(value)
    if letter == "T":
        return tuple(bytes.fromhex(tid) for tid in value)
    return value


def _expected_fields(vector: Dict[str, Any]) -> Dict[str, Any]:
    cls, layout = _layout_of(vector["type"])
    names = cls._fields  # type: ignore[attr-defined]
    assert set(vector["fields"]) == set(names), "vector fields differ from the frame's"
    return {name: _wire_value(letter, vector["fields"][name]) for name, letter in zip(names, layout)}


def test_vectors_are_present() -> None:
    assert {"handshake", "control", "send", "return", "lifecycle", "kv"} <= set(VECTORS)
    assert len(VALID) >= 20 and len(INVALID) >= 10


@pytest.mark.parametrize("vector", VALID)
def test_decode(impl: ModuleType, vector: Dict[str, Any]) -> None:
    message = impl.decode_frame(bytes.fromhex(vector["hex"]))
    assert type(message) is _layout_of(vector["type"])[0]
    assert message._asdict() == _expected_fields(vector)  # type: ignore[attr-defined]


@pytest.mark.parametrize("vector", VALID)
def test_encode(impl: ModuleType, vector: Dict[str, Any]) -> None:
    cls = _layout_of(vector["type"])[0]
    message = cls(**_expected_fields(vector))
    assert impl.encode(message).hex() == vector["hex"]


@pytest.mark.parametrize("vector", VALID)
def test_decode_from_a_stream(impl: ModuleType, vector: Dict[str, Any]) -> None:
    """The frame embedded in a larger buffer, cut at every byte, decodes the same."""
    frame = bytes.fromhex(vector["hex"])
    buf = bytearray(b"\xee" * 3 + frame + frame[:4])
    for cut in range(3, 3 + len(frame)):
        assert impl.decode_frames(buf, 3, cut, 1 << 20) == ([], 3)
    frames, end = impl.decode_frames(buf, 3, len(buf), 1 << 20)
    assert end == 3 + len(frame)
    assert frames == [impl.decode_frame(frame)]


@pytest.mark.parametrize("vector", INVALID)
def test_invalid_rejected(impl: ModuleType, vector: Dict[str, Any]) -> None:
    with pytest.raises(DecodeError) as caught:
        impl.decode_frame(bytes.fromhex(vector["hex"]), INVALID_LIMIT)
    assert caught.value.status == Status[vector["error"]]


@pytest.mark.parametrize("vector", INVALID)
def test_invalid_rejected_in_a_stream(impl: ModuleType, vector: Dict[str, Any]) -> None:
    """A stream decoder either rejects the bytes or waits for more; it never yields a frame."""
    data = bytes.fromhex(vector["hex"])
    try:
        frames, end = impl.decode_frames(data, 0, len(data), INVALID_LIMIT)
    except DecodeError as exc:
        assert exc.status == Status[vector["error"]]
    else:
        assert (frames, end) == ([], 0)


KV = VECTORS["kv"]


@pytest.mark.parametrize("vector", KV["vectors"], ids=[v["name"] for v in KV["vectors"]])
def test_kv_vectors(vector: Dict[str, Any]) -> None:
    pairs = [(k.encode(), v.encode()) for k, v in vector["pairs"]]
    assert info_parse(bytes.fromhex(vector["hex"])) == pairs
    assert info_encode(pairs).hex() == vector["hex"]
    assert info_encode([tuple(p) for p in vector["pairs"]]).hex() == vector["hex"]


@pytest.mark.parametrize("vector", KV["invalid"], ids=[v["name"] for v in KV["invalid"]])
def test_kv_invalid(vector: Dict[str, Any]) -> None:
    with pytest.raises(DecodeError) as caught:
        info_parse(bytes.fromhex(vector["hex"]))
    assert caught.value.status == Status[vector["error"]]
