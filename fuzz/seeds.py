#!/usr/bin/env python3
"""Writes the seed corpus of each fuzz target into <out>/<target>/, derived
from the shared test vectors (proto/vectors/*.json) and a few HTTP
requests. A target without an entry here starts from an empty corpus.

Usage: python3 fuzz/seeds.py <out-dir>"""

from __future__ import annotations

import hashlib
import json
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def vectors() -> dict[str, list[dict]]:
    out = {}
    for path in sorted((ROOT / "proto" / "vectors").glob("*.json")):
        doc = json.loads(path.read_text())
        out[doc["family"]] = doc.get("vectors", []) + doc.get("invalid", [])
    return out


def frame(ty: int, body: bytes) -> bytes:
    return struct.pack("<I", len(body) + 1) + bytes([ty]) + body


def s16(s: bytes) -> bytes:
    return struct.pack("<H", len(s)) + s


def b32(b: bytes) -> bytes:
    return struct.pack("<I", len(b)) + b


def hello(prefix: bytes = b"/raw/") -> bytes:
    return frame(0x01, struct.pack("<HII", 1, 1, 0) + s16(b"") + s16(prefix))


def send(ty: int, nanos: int, name: bytes, body: bytes, timeout: int = 1000, flags: int = 0) -> bytes:
    # The first unmanaged instance of a fuzzing core is instance 2 (echo is 1).
    tid = struct.pack(">QII", nanos, 1, 2)
    return frame(ty, tid + struct.pack("<IbB", timeout, 0, flags) + s16(name) + b32(b"") + b32(body))


def socket_sessions(vecs: dict[str, list[dict]]) -> list[bytes]:
    """HELLO, then each instance-to-core vector; and whole conversations."""
    split = b"\x07"  # first byte: the write size (8 bytes) of the session
    seeds = [split + bytes.fromhex(v["hex"]) for v in vecs["handshake"]]
    for fam in ("send", "return", "control", "lifecycle"):
        seeds += [split + hello() + bytes.fromhex(v["hex"]) for v in vecs[fam]]
    sub = frame(0x02, struct.pack("<I", 1) + s16(b"x"))
    seeds.append(
        split
        + hello()
        + sub
        + send(0x11, 1, b"/echo/x", b"hi")
        + send(0x10, 2, b"/raw/x", b"self")
        + send(0x12, 3, b"/echo/*", b"m")
        + send(0x10, 4, b"/nobody", b"", flags=1)
        + frame(0x30, struct.pack("<Q", 9))
        + frame(0x32, b"")
    )
    return seeds


HTTP = [
    b"GET /echo/x?value=42 HTTP/1.1\r\nhost: t\r\n\r\n",
    b"POST /echo/x HTTP/1.1\r\nhost: t\r\ncontent-length: 5\r\n\r\nhello",
    b"POST /echo/x HTTP/1.1\r\nhost: t\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    b"GET /echo/a HTTP/1.1\r\nhost: t\r\n\r\nGET /echo/b?x=%41&y HTTP/1.1\r\nhost: t\r\n\r\n",
    b"DELETE /nobody HTTP/1.0\r\n\r\n",
    b"HEAD /echo/x HTTP/1.1\r\nhost: t\r\ntraceparent: 00-abc-def-01\r\nconnection: close\r\n\r\n",
    b"POST /echo/x HTTP/1.1\r\nhost: t\r\ncontent-length: 10\r\n\r\nabc",
]


# Messages a CloudI API writes (as erlang_py encodes them): send_sync,
# recv_async, shutdown, polling.
CLOUDI_TERMS = [
    "836806730973656e645f73796e636b0003612f626d000000046b0076006d0000000372657162000013886100",
    "836804730a726563765f6173796e636e0400ffffffff6d0000001000000000000000000000000000000000770474727565",
    "836802730873687574646f776e6a",
    "837307706f6c6c696e67",
]


def seeds_by_target() -> dict[str, list[bytes]]:
    vecs = vectors()
    frames = [bytes.fromhex(v["hex"]) for fam, vs in vecs.items() if fam != "kv" for v in vs]
    return {
        "frame_decode": frames + [b"".join(frames)],
        "kv": [bytes.fromhex(v["hex"]) for v in vecs["kv"]],
        "core_socket": socket_sessions(vecs),
        "http_session": [b"\x00" + h for h in HTTP] + [b"\x03" + h for h in HTTP],
        "cloudi_terms": [bytes.fromhex(h) for h in CLOUDI_TERMS],
    }


def main() -> None:
    out = Path(sys.argv[1])
    for target, seeds in seeds_by_target().items():
        d = out / target
        d.mkdir(parents=True, exist_ok=True)
        for seed in seeds:
            (d / hashlib.sha1(seed).hexdigest()).write_bytes(seed)


if __name__ == "__main__":
    main()
