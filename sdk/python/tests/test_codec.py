"""Codec behaviour beyond the vectors: bad values, the fast paths, and C/Python parity."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from types import ModuleType
from typing import Any, List

import pytest
from conftest import C_CODEC

import cumulo
from cumulo import DecodeError, Status, _pycodec
from cumulo import messages as m

TID = bytes(range(16))


@pytest.mark.parametrize("message", [
    m.Ping(-1), m.Ping(1 << 64), m.Terminate(1 << 32), m.Reply(1, 70000, 0, ""),
    m.SendAsync(TID, 0, 128, 0, "/a", b"", b""), m.SendAsync(TID, 0, -129, 0, "/a", b"", b""),
    m.SendAsync(TID, 0, 0, 256, "/a", b"", b""), m.SendAsync(TID[:15], 0, 0, 0, "/a", b"", b""),
    m.Subscribe(1, "x" * 65536), m.McastSent(TID, (TID, b"short")), m.Subscribe(1, "\ud800"),
])
def test_encode_refuses_out_of_range(impl: ModuleType, message: Any) -> None:
    with pytest.raises(ValueError):
        impl.encode(message)


@pytest.mark.parametrize("message", [
    m.Subscribe(1, b"bytes, not str"),  # type: ignore[arg-type]
    m.Return(TID, 0, "str, not bytes", b""),  # type: ignore[arg-type]
    m.Ping("1"),  # type: ignore[arg-type]
])
def test_encode_refuses_wrong_types(impl: ModuleType, message: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        impl.encode(message)


def test_encode_refuses_non_frames(impl: ModuleType) -> None:
    with pytest.raises(TypeError):
        impl.encode((1, 2))


def test_fast_paths_match_generic_encode(impl: ModuleType) -> None:
    assert impl.encode_return(TID, 7, b"k\0v\0", bytearray(b"resp")) == impl.encode(
        m.Return(TID, 7, b"k\0v\0", b"resp"))
    for code, cls in [(m.SEND_ASYNC, m.SendAsync), (m.SEND_SYNC, m.SendSync),
                      (m.MCAST_ASYNC, m.McastAsync), (m.FORWARD, m.Forward)]:
        fields: Any = (TID, 99, -5, 1, "/caf\u00e9", b"info\0x\0", memoryview(b"request"))
        assert impl.encode_send(code, *fields) == impl.encode(cls(*fields))
    assert impl.encode_pong(2**64 - 1) == impl.encode(m.Pong(2**64 - 1))
    with pytest.raises(ValueError):
        impl.encode_send(m.RETURN, TID, 0, 0, 0, "/a", b"", b"")


def test_decode_frames_checks_bounds(impl: ModuleType) -> None:
    data = impl.encode(m.Ping(1))
    with pytest.raises(ValueError):
        impl.decode_frames(data, 0, len(data) + 1, 100)
    with pytest.raises(ValueError):
        impl.decode_frames(data, 5, 2, 100)
    assert impl.decode_frames(memoryview(data), 0, len(data), 100) == ([m.Ping(1)], len(data))


def test_too_large_refused_before_the_body(impl: ModuleType) -> None:
    header = (2000).to_bytes(4, "little")  # no body at all: refused on the length alone
    with pytest.raises(DecodeError) as caught:
        impl.decode_frames(header, 0, 4, 1999)
    assert caught.value.status is Status.TOO_LARGE
    assert impl.decode_frames(header, 0, 4, 2000) == ([], 0)


def _random_value(rng: random.Random, letter: str) -> Any:
    if letter == "B":
        return rng.randrange(256)
    if letter == "b":
        return rng.randrange(-128, 128)
    if letter == "H":
        return rng.choice([0, 1, 0xFFFF, rng.randrange(1 << 16)])
    if letter == "I":
        return rng.choice([0, 0xFFFFFFFF, rng.randrange(1 << 32)])
    if letter == "Q":
        return rng.choice([0, (1 << 64) - 1, rng.randrange(1 << 64)])
    if letter == "t":
        return rng.randbytes(16)
    if letter == "s":
        return "".join(rng.choice("az/*?\u00e9\u96f2\U0001f600") for _ in range(rng.randrange(12)))
    if letter == "y":
        return rng.randbytes(rng.choice([0, 1, rng.randrange(300)]))
    return tuple(rng.randbytes(16) for _ in range(rng.randrange(4)))


def _random_frames(seed: int, count: int) -> List[Any]:
    rng = random.Random(seed)
    layouts = list(m.LAYOUTS.values())
    frames = []
    for _ in range(count):
        cls, layout = rng.choice(layouts)
        frames.append(cls(*(_random_value(rng, letter) for letter in layout)))
    return frames


def test_random_frames_round_trip(impl: ModuleType) -> None:
    frames = _random_frames(1, 400)
    stream = b"".join(impl.encode(frame) for frame in frames)
    assert impl.decode_frames(stream, 0, len(stream), 1 << 20) == (frames, len(stream))
    assert b"".join(_pycodec.encode(frame) for frame in frames) == stream


def _outcome(impl: ModuleType, data: bytes) -> Any:
    try:
        return impl.decode_frame(data, 4096)
    except DecodeError as exc:
        return exc.status


@pytest.mark.skipif(C_CODEC is None, reason="cumulo._ccodec is not built")
def test_c_and_python_agree_on_mutated_frames() -> None:
    """Corrupted frames: both implementations return the same message or the same status."""
    rng = random.Random(2)
    for frame in _random_frames(3, 300):
        data = bytearray(_pycodec.encode(frame))
        for _ in range(6):
            mutated = bytearray(data)
            action = rng.randrange(3)
            if action == 0:
                mutated[rng.randrange(len(mutated))] = rng.randrange(256)
            elif action == 1:
                del mutated[rng.randrange(len(mutated)):]
            else:
                mutated += rng.randbytes(rng.randrange(1, 4))
            assert _outcome(C_CODEC, bytes(mutated)) == _outcome(_pycodec, bytes(mutated)), mutated.hex()


def test_implementation_selection() -> None:
    def implementation(**env: str) -> str:
        code = "import cumulo; print(cumulo.implementation(), cumulo.ACCELERATED)"
        out = subprocess.run([sys.executable, "-c", code],
                             env=dict(os.environ, **env), capture_output=True, check=True, text=True,
                             cwd=os.path.dirname(os.path.dirname(cumulo.__file__)))
        return out.stdout.strip()

    assert implementation(CUMULO_PURE_PYTHON="1") == "python False"
    assert implementation(CUMULO_PURE_PYTHON="") == ("c True" if C_CODEC is not None else "python False")
