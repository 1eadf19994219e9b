#!/usr/bin/env python3
"""Writes proto/vectors/*.json from the layouts of proto/PROTOCOL.md.

This is an independent, deliberately plain encoder: it exists so the vectors
are not produced by any SDK's codec they are meant to check. Run it after
changing PROTOCOL.md; commit the JSON it writes.
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

TYPES = {
    "HELLO": 0x01, "SUBSCRIBE": 0x02, "UNSUBSCRIBE": 0x03, "SUBSCRIBE_COUNT": 0x04,
    "SEND_ASYNC": 0x10, "SEND_SYNC": 0x11, "MCAST_ASYNC": 0x12,
    "RETURN": 0x20, "FORWARD": 0x21, "PING": 0x30, "PONG": 0x31, "GOODBYE": 0x32,
    "WELCOME": 0x81, "REQUEST": 0x82, "RESPONSE": 0x83, "REPLY": 0x84,
    "MCAST_SENT": 0x85, "TERMINATE": 0x86, "ERROR": 0x87,
}

SEND = [("trans_id", "tid"), ("timeout", "u32"), ("priority", "i8"), ("flags", "u8"),
        ("name", "str"), ("request_info", "bytes"), ("request", "bytes")]
CONTROL = [("req_id", "u32"), ("pattern", "str")]
LAYOUTS = {
    "HELLO": [("version", "u16"), ("window", "u32"), ("thread_index", "u32"),
              ("token", "str"), ("prefix", "str")],
    "SUBSCRIBE": CONTROL, "UNSUBSCRIBE": CONTROL, "SUBSCRIBE_COUNT": CONTROL,
    "SEND_ASYNC": SEND, "SEND_SYNC": SEND, "MCAST_ASYNC": SEND, "FORWARD": SEND,
    "RETURN": [("trans_id", "tid"), ("status", "u16"), ("response_info", "bytes"),
               ("response", "bytes")],
    "PING": [("nonce", "u64")], "PONG": [("nonce", "u64")], "GOODBYE": [],
    "WELCOME": [("version", "u16"), ("node_id", "u32"), ("instance_id", "u32"),
                ("process_index", "u32"), ("process_count", "u32"), ("thread_count", "u32"),
                ("window", "u32"), ("max_frame", "u32"), ("timeout_async", "u32"),
                ("timeout_sync", "u32"), ("timeout_terminate", "u32"),
                ("priority_default", "i8"), ("keepalive", "u32"), ("prefix", "str")],
    "REQUEST": [("trans_id", "tid"), ("timeout", "u32"), ("priority", "i8"), ("flags", "u8"),
                ("source", "u64"), ("name", "str"), ("pattern", "str"),
                ("request_info", "bytes"), ("request", "bytes")],
    "RESPONSE": [("trans_id", "tid"), ("status", "u16"), ("response_info", "bytes"),
                 ("response", "bytes")],
    "REPLY": [("req_id", "u32"), ("status", "u16"), ("value", "u32"), ("message", "str")],
    "MCAST_SENT": [("trans_id", "tid"), ("trans_ids", "tids")],
    "TERMINATE": [("timeout", "u32")],
    "ERROR": [("status", "u16"), ("message", "str")],
}


def field(kind, value):
    if kind == "u8":
        return struct.pack("<B", value)
    if kind == "i8":
        return struct.pack("<b", value)
    if kind == "u16":
        return struct.pack("<H", value)
    if kind == "u32":
        return struct.pack("<I", value)
    if kind == "u64":
        return struct.pack("<Q", value)
    if kind == "tid":
        raw = bytes.fromhex(value)
        assert len(raw) == 16
        return raw
    if kind == "str":
        raw = value.encode("utf-8")
        return struct.pack("<H", len(raw)) + raw
    if kind == "bytes":
        raw = bytes.fromhex(value)
        return struct.pack("<I", len(raw)) + raw
    if kind == "tids":  # MCAST_SENT: u32 count, then the ids
        return struct.pack("<I", len(value)) + b"".join(bytes.fromhex(t) for t in value)
    raise ValueError(kind)


def frame(type_name, fields):
    body = bytes([TYPES[type_name]])
    for name, kind in LAYOUTS[type_name]:
        body += field(kind, fields[name])
    return struct.pack("<I", len(body)) + body


def tid(ns, node, inst):
    return (struct.pack(">QII", ns, node, inst)).hex()


def hx(s):
    return s.encode("utf-8").hex() if isinstance(s, str) else s.hex()


def kv(pairs):
    return b"".join(k.encode() + b"\0" + v.encode() + b"\0" for k, v in pairs)


def vec(vector_name, type_name, **fields):
    return {"name": vector_name, "type": type_name, "hex": frame(type_name, fields).hex(),
            "fields": fields}


def bad(name, raw, error="MALFORMED"):
    return {"name": name, "hex": raw.hex(), "error": error}


T1 = tid(1_763_769_600_123_456_789, 1, 7)
T2 = tid(1_763_769_600_123_456_790, 1, 7)
T3 = tid(1_763_769_600_000_000_001, 1, 0)

families = {}

families["handshake"] = {
    "vectors": [
        vec("hello_managed", "HELLO", version=1, window=1, thread_index=0,
            token="c0ffee00c0ffee00", prefix=""),
        vec("hello_unmanaged_window16", "HELLO", version=1, window=16, thread_index=3,
            token="", prefix="/bench/"),
        vec("welcome", "WELCOME", version=1, node_id=1, instance_id=7, process_index=2,
            process_count=4, thread_count=2, window=1, max_frame=8 * 1024 * 1024,
            timeout_async=5000, timeout_sync=5000, timeout_terminate=2000,
            priority_default=0, keepalive=5000, prefix="/tests/http_req/"),
        vec("welcome_negative_priority_unicode_prefix", "WELCOME", version=1, node_id=4294967295,
            instance_id=1, process_index=0, process_count=1, thread_count=1, window=1024,
            max_frame=1024, timeout_async=1, timeout_sync=4294967295, timeout_terminate=0,
            priority_default=-128, keepalive=1000, prefix="/caf\u00e9/\u96f2/"),
    ],
    "invalid": [
        bad("hello_truncated_token", frame("HELLO", dict(version=1, window=1, thread_index=0,
                                                          token="abcdef", prefix=""))[:-4]),
        bad("hello_trailing_byte", (lambda f: struct.pack("<I", len(f) - 4 + 1) + f[4:] + b"\0")(
            frame("HELLO", dict(version=1, window=1, thread_index=0, token="", prefix="/a/")))),
        bad("hello_bad_utf8", struct.pack("<I", 1 + 2 + 4 + 4 + 2 + 2 + 2) + bytes([0x01])
            + struct.pack("<HII", 1, 1, 0) + struct.pack("<H", 2) + b"\xc3\x28"
            + struct.pack("<H", 0)),
        bad("zero_length", struct.pack("<I", 0)),
        bad("unknown_type", struct.pack("<I", 1) + bytes([0x7e])),
        bad("length_over_limit", struct.pack("<I", 1025) + bytes([0x01]), "TOO_LARGE"),
    ],
}

families["control"] = {
    "vectors": [
        vec("subscribe", "SUBSCRIBE", req_id=1, pattern="rust.xml/get"),
        vec("subscribe_wildcards", "SUBSCRIBE", req_id=4294967295, pattern="users/?/items/*"),
        vec("unsubscribe", "UNSUBSCRIBE", req_id=2, pattern="rust.xml/get"),
        vec("subscribe_count", "SUBSCRIBE_COUNT", req_id=3, pattern="rust.xml/get"),
        vec("reply_ok", "REPLY", req_id=1, status=0, value=0, message=""),
        vec("reply_count", "REPLY", req_id=3, status=0, value=2, message=""),
        vec("reply_error", "REPLY", req_id=9, status=9,
            value=0, message="invalid pattern 'a**': two wildcards side by side"),
    ],
    "invalid": [
        bad("subscribe_pattern_length_past_end", struct.pack("<I", 1 + 4 + 2 + 3) + bytes([0x02])
            + struct.pack("<IH", 1, 200) + b"abc"),
        bad("reply_missing_message", struct.pack("<I", 1 + 4 + 2 + 4) + bytes([0x84])
            + struct.pack("<IHI", 1, 0, 0)),
    ],
}

INFO = hx(kv([("accept", "text/xml"), ("traceparent",
                                      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")]))
families["send"] = {
    "vectors": [
        vec("send_async", "SEND_ASYNC", trans_id=T1, timeout=5000, priority=0, flags=0,
            name="/tests/http_req/rust.xml/get", request_info="",
            request=hx(kv([("value", "42")]))),
        vec("send_sync_negative_priority_wait", "SEND_SYNC", trans_id=T2, timeout=0,
            priority=-5, flags=1, name="/echo/x", request_info=INFO, request=hx("hello")),
        vec("mcast_async", "MCAST_ASYNC", trans_id=T1, timeout=1000, priority=127, flags=0,
            name="/tests/*", request_info="", request=""),
        vec("forward", "FORWARD", trans_id=T3, timeout=250, priority=-128, flags=0,
            name="/other/name", request_info=INFO, request="00ff00ff"),
        vec("request", "REQUEST", trans_id=T1, timeout=4999, priority=0, flags=1,
            source=(1 << 32) | 7, name="/tests/http_req/rust.xml/get",
            pattern="/tests/http_req/rust.xml/get", request_info="",
            request=hx(kv([("value", "42")]))),
        vec("request_mcast_copy_wildcard", "REQUEST", trans_id=T3, timeout=10, priority=3,
            flags=2, source=0, name="/a/b/c", pattern="/a/*", request_info=INFO, request=""),
    ],
    "invalid": [
        bad("send_truncated_tid", struct.pack("<I", 1 + 8) + bytes([0x10]) + b"\0" * 8),
        bad("send_request_length_past_end",
            (lambda f: f[:-4] + struct.pack("<I", 2))(  # request claims 2 bytes, none follow
                frame("SEND_ASYNC", dict(trans_id=T1, timeout=1, priority=0, flags=0, name="/a",
                                         request_info="", request="")))),
        bad("request_name_bad_utf8", struct.pack("<I", 1 + 16 + 4 + 1 + 1 + 8 + 3 + 2 + 4 + 4)
            + bytes([0x82]) + bytes.fromhex(T1) + struct.pack("<IbBQ", 1, 0, 0, 0)
            + struct.pack("<H", 1) + b"\xff" + struct.pack("<H", 0) + struct.pack("<II", 0, 0)),
    ],
}

XML = "<http_test><value>42</value></http_test>"
families["return"] = {
    "vectors": [
        vec("return_ok", "RETURN", trans_id=T1, status=0,
            response_info=hx(kv([("content-type", "text/xml; charset=utf-8")])),
            response=hx(XML)),
        vec("return_service_error", "RETURN", trans_id=T2, status=7, response_info="",
            response=hx("handler raised ValueError: bad input")),
        vec("response_ok", "RESPONSE", trans_id=T1, status=0,
            response_info=hx(kv([("content-type", "text/xml; charset=utf-8")])),
            response=hx(XML)),
        vec("response_timeout", "RESPONSE", trans_id=T2, status=1, response_info="",
            response=hx("timeout after 5000 ms waiting for /tests/http_req/rust.xml/get")),
        vec("response_no_service", "RESPONSE", trans_id=T2, status=2, response_info="",
            response=hx("no service subscribes /nowhere")),
        vec("response_unavailable", "RESPONSE", trans_id=T2, status=13, response_info="",
            response=hx("/tests/crashy/ was given up after 5 restarts in 300 s (max_r, max_t)")),
        vec("return_unavailable", "RETURN", trans_id=T3, status=13, response_info="",
            response=hx("the database behind /tests/db/ is starting")),
        vec("mcast_sent_two", "MCAST_SENT", trans_id=T1, trans_ids=[T2, T3]),
        vec("mcast_sent_none", "MCAST_SENT", trans_id=T1, trans_ids=[]),
    ],
    "invalid": [
        bad("mcast_sent_count_past_end", struct.pack("<I", 1 + 16 + 4 + 16) + bytes([0x85])
            + bytes.fromhex(T1) + struct.pack("<I", 2) + bytes.fromhex(T2)),
        bad("return_missing_response", struct.pack("<I", 1 + 16 + 2 + 4) + bytes([0x20])
            + bytes.fromhex(T1) + struct.pack("<HI", 0, 0)),
    ],
}

families["lifecycle"] = {
    "vectors": [
        vec("ping", "PING", nonce=1),
        vec("pong_large_nonce", "PONG", nonce=0x0123456789ABCDEF),
        vec("goodbye", "GOODBYE"),
        vec("terminate", "TERMINATE", timeout=2000),
        vec("error_too_large", "ERROR", status=8,
            message="frame of 9000000 bytes is over the limit of 8388608"),
        vec("error_protocol", "ERROR", status=12, message="expected HELLO first"),
    ],
    "invalid": [
        bad("ping_short", struct.pack("<I", 1 + 4) + bytes([0x30]) + b"\1\0\0\0"),
        bad("goodbye_trailing", struct.pack("<I", 2) + bytes([0x32, 0x00])),
        bad("terminate_truncated_length_field", b"\x05\x00"),
    ],
}

kv_vectors = [
    {"name": "empty", "hex": "", "pairs": []},
    {"name": "one_pair", "hex": kv([("value", "42")]).hex(), "pairs": [["value", "42"]]},
    {"name": "repeated_key_empty_value",
     "hex": kv([("a", ""), ("a", "2"), ("content-type", "text/xml; charset=utf-8")]).hex(),
     "pairs": [["a", ""], ["a", "2"], ["content-type", "text/xml; charset=utf-8"]]},
    {"name": "utf8", "hex": kv([("ключ", "値")]).hex(), "pairs": [["ключ", "値"]]},
    # Section 5.1: W3C trace context, as an SDK appends it after a handler's own pairs.
    {"name": "trace_context",
     "hex": kv([("value", "42"), ("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
                ("tracestate", "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")]).hex(),
     "pairs": [["value", "42"], ["traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"],
               ["tracestate", "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"]]},
]
kv_invalid = [
    {"name": "no_trailing_nul", "hex": b"value\x0042".hex(), "error": "MALFORMED"},
    {"name": "odd_fields", "hex": b"value\x00".hex(), "error": "MALFORMED"},
    {"name": "key_only_no_nul", "hex": b"value".hex(), "error": "MALFORMED"},
]

for fam, content in families.items():
    with open(os.path.join(HERE, fam + ".json"), "w") as out:
        json.dump({"family": fam, **content}, out, indent=1, ensure_ascii=False)
        out.write("\n")
with open(os.path.join(HERE, "kv.json"), "w") as out:
    json.dump({"family": "kv", "vectors": kv_vectors, "invalid": kv_invalid}, out, indent=1,
              ensure_ascii=False)
    out.write("\n")
print("wrote", ", ".join(sorted(list(families) + ["kv"])))
