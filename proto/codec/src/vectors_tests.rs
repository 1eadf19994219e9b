//! Runs the shared vectors of `proto/vectors/` against this codec: every
//! vector decodes to its fields and its fields encode to its bytes; every
//! invalid one is rejected.

use crate::frame::*;
use crate::{decode, encode_frame, info, next_frame_len, DecodeError, TransId, LEN_PREFIX};
use serde_json::{json, Map, Value};
use std::path::PathBuf;

fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../vectors")
}

fn load(family: &str) -> Value {
    let path = vectors_dir().join(format!("{family}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// The decoded frame as the vectors' field map.
fn fields_of(f: &Frame) -> Value {
    let send = |s: &Send| {
        json!({"trans_id": s.trans_id.to_hex(), "timeout": s.timeout, "priority": s.priority,
               "flags": s.flags, "name": s.name, "request_info": hex(s.request_info),
               "request": hex(s.request)})
    };
    let ret = |r: &Return| {
        json!({"trans_id": r.trans_id.to_hex(), "status": r.status,
               "response_info": hex(r.response_info), "response": hex(r.response)})
    };
    let control = |c: &Control| json!({"req_id": c.req_id, "pattern": c.pattern});
    match f {
        Frame::Hello(h) => json!({"version": h.version, "window": h.window,
            "thread_index": h.thread_index, "token": h.token, "prefix": h.prefix}),
        Frame::Subscribe(c) | Frame::Unsubscribe(c) | Frame::SubscribeCount(c) => control(c),
        Frame::SendAsync(s) | Frame::SendSync(s) | Frame::McastAsync(s) | Frame::Forward(s) => send(s),
        Frame::Return(r) | Frame::Response(r) => ret(r),
        Frame::Ping(n) | Frame::Pong(n) => json!({ "nonce": n }),
        Frame::Goodbye => json!({}),
        Frame::Welcome(w) => json!({"version": w.version, "node_id": w.node_id,
            "instance_id": w.instance_id, "process_index": w.process_index,
            "process_count": w.process_count, "thread_count": w.thread_count,
            "window": w.window, "max_frame": w.max_frame, "timeout_async": w.timeout_async,
            "timeout_sync": w.timeout_sync, "timeout_terminate": w.timeout_terminate,
            "priority_default": w.priority_default, "keepalive": w.keepalive,
            "prefix": w.prefix}),
        Frame::Request(r) => json!({"trans_id": r.trans_id.to_hex(), "timeout": r.timeout,
            "priority": r.priority, "flags": r.flags, "source": r.source, "name": r.name,
            "pattern": r.pattern, "request_info": hex(r.request_info),
            "request": hex(r.request)}),
        Frame::Reply(r) => json!({"req_id": r.req_id, "status": r.status, "value": r.value,
            "message": r.message}),
        Frame::McastSent(m) => json!({"trans_id": m.trans_id.to_hex(),
            "trans_ids": m.ids().map(|t| t.to_hex()).collect::<Vec<_>>()}),
        Frame::Terminate(t) => json!({ "timeout": t }),
        Frame::Error(e) => json!({"status": e.status, "message": e.message}),
    }
}

/// Builds the frame a vector describes and encodes it.
fn encode_fields(ty: &str, f: &Map<String, Value>) -> Vec<u8> {
    let n = |k: &str| f[k].as_i64().unwrap_or_else(|| panic!("field {k}"));
    let u64_ = |k: &str| f[k].as_u64().unwrap();
    let s = |k: &str| f[k].as_str().unwrap();
    let t = |k: &str| TransId(unhex(f[k].as_str().unwrap()).try_into().unwrap());
    let (info_, req_, pattern_) = (
        f.get("request_info").or(f.get("response_info")).map(|v| unhex(v.as_str().unwrap())),
        f.get("request").or(f.get("response")).map(|v| unhex(v.as_str().unwrap())),
        f.get("pattern").and_then(|v| v.as_str()),
    );
    let info_ = info_.unwrap_or_default();
    let req_ = req_.unwrap_or_default();
    let mcast_ids: Vec<u8> = f
        .get("trans_ids")
        .map(|v| v.as_array().unwrap().iter().flat_map(|x| unhex(x.as_str().unwrap())).collect())
        .unwrap_or_default();
    let send = || Send {
        trans_id: t("trans_id"),
        timeout: n("timeout") as u32,
        priority: n("priority") as i8,
        flags: n("flags") as u8,
        name: s("name"),
        request_info: &info_,
        request: &req_,
    };
    let ret = || Return { trans_id: t("trans_id"), status: n("status") as u16, response_info: &info_, response: &req_ };
    let control = || Control { req_id: n("req_id") as u32, pattern: pattern_.unwrap() };
    let frame = match ty {
        "HELLO" => Frame::Hello(Hello {
            version: n("version") as u16,
            window: n("window") as u32,
            thread_index: n("thread_index") as u32,
            token: s("token"),
            prefix: s("prefix"),
        }),
        "SUBSCRIBE" => Frame::Subscribe(control()),
        "UNSUBSCRIBE" => Frame::Unsubscribe(control()),
        "SUBSCRIBE_COUNT" => Frame::SubscribeCount(control()),
        "SEND_ASYNC" => Frame::SendAsync(send()),
        "SEND_SYNC" => Frame::SendSync(send()),
        "MCAST_ASYNC" => Frame::McastAsync(send()),
        "FORWARD" => Frame::Forward(send()),
        "RETURN" => Frame::Return(ret()),
        "RESPONSE" => Frame::Response(ret()),
        "PING" => Frame::Ping(u64_("nonce")),
        "PONG" => Frame::Pong(u64_("nonce")),
        "GOODBYE" => Frame::Goodbye,
        "WELCOME" => Frame::Welcome(Welcome {
            version: n("version") as u16,
            node_id: n("node_id") as u32,
            instance_id: n("instance_id") as u32,
            process_index: n("process_index") as u32,
            process_count: n("process_count") as u32,
            thread_count: n("thread_count") as u32,
            window: n("window") as u32,
            max_frame: n("max_frame") as u32,
            timeout_async: n("timeout_async") as u32,
            timeout_sync: n("timeout_sync") as u32,
            timeout_terminate: n("timeout_terminate") as u32,
            priority_default: n("priority_default") as i8,
            keepalive: n("keepalive") as u32,
            prefix: s("prefix"),
        }),
        "REQUEST" => Frame::Request(Request {
            trans_id: t("trans_id"),
            timeout: n("timeout") as u32,
            priority: n("priority") as i8,
            flags: n("flags") as u8,
            source: u64_("source"),
            name: s("name"),
            pattern: s("pattern"),
            request_info: &info_,
            request: &req_,
        }),
        "REPLY" => Frame::Reply(Reply {
            req_id: n("req_id") as u32,
            status: n("status") as u16,
            value: n("value") as u32,
            message: s("message"),
        }),
        "MCAST_SENT" => Frame::McastSent(McastSent { trans_id: t("trans_id"), trans_ids: &mcast_ids }),
        "TERMINATE" => Frame::Terminate(n("timeout") as u32),
        "ERROR" => Frame::Error(ErrorFrame { status: n("status") as u16, message: s("message") }),
        other => panic!("unknown type {other}"),
    };
    let mut out = Vec::new();
    encode_frame(&mut out, &frame);
    out
}

/// Every frame family of `proto/vectors/` (each `*.json` but `kv.json`, the
/// key/value vectors), read from the folder so that a new file is covered
/// without a change here.
fn families() -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir(vectors_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .filter(|f| f != "kv")
        .collect();
    found.sort();
    for known in ["control", "handshake", "lifecycle", "return", "send"] {
        assert!(found.iter().any(|f| f == known), "{known}.json missing from {}", vectors_dir().display());
    }
    found
}

#[test]
fn every_vector_decodes_and_encodes() {
    let mut checked = 0;
    for family in families() {
        let family = family.as_str();
        let doc = load(family);
        for v in doc["vectors"].as_array().unwrap() {
            let name = v["name"].as_str().unwrap();
            let raw = unhex(v["hex"].as_str().unwrap());
            let total = next_frame_len(&raw, crate::DEFAULT_MAX_FRAME).unwrap().unwrap();
            assert_eq!(total, raw.len(), "{family}/{name}: length prefix");
            let frame = decode(&raw[LEN_PREFIX..]).unwrap_or_else(|e| panic!("{family}/{name}: {e}"));
            assert_eq!(frame.type_name(), v["type"].as_str().unwrap(), "{family}/{name}");
            assert_eq!(fields_of(&frame), v["fields"], "{family}/{name}: decoded fields");
            let encoded = encode_fields(v["type"].as_str().unwrap(), v["fields"].as_object().unwrap());
            assert_eq!(hex(&encoded), v["hex"].as_str().unwrap(), "{family}/{name}: encoding");
            checked += 1;
        }
    }
    assert!(checked >= 30, "only {checked} vectors found");
}

#[test]
fn every_invalid_vector_is_rejected() {
    let mut checked = 0;
    for family in families() {
        let family = family.as_str();
        let doc = load(family);
        for v in doc["invalid"].as_array().unwrap() {
            let name = v["name"].as_str().unwrap();
            let raw = unhex(v["hex"].as_str().unwrap());
            let expected = v["error"].as_str().unwrap();
            // The limit of 1024 bytes is the one the TOO_LARGE vectors assume.
            let err = match next_frame_len(&raw, 1024) {
                Err(e) => e,
                Ok(None) => DecodeError::Malformed("truncated".into()),
                Ok(Some(total)) if total < raw.len() => DecodeError::Malformed("trailing".into()),
                Ok(Some(total)) => match decode(&raw[LEN_PREFIX..total]) {
                    Err(e) => e,
                    Ok(f) => panic!("{family}/{name}: decoded as {f:?}"),
                },
            };
            assert_eq!(err.status().name(), expected, "{family}/{name}: {err}");
            checked += 1;
        }
    }
    assert!(checked >= 10);
}

#[test]
fn kv_vectors() {
    let doc = load("kv");
    for v in doc["vectors"].as_array().unwrap() {
        let raw = unhex(v["hex"].as_str().unwrap());
        let pairs: Vec<(String, String)> = info::parse_all(&raw)
            .unwrap()
            .into_iter()
            .map(|(k, v)| (String::from_utf8(k.to_vec()).unwrap(), String::from_utf8(v.to_vec()).unwrap()))
            .collect();
        let expected: Vec<(String, String)> = v["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p[0].as_str().unwrap().to_string(), p[1].as_str().unwrap().to_string()))
            .collect();
        assert_eq!(pairs, expected, "{}", v["name"]);
        assert_eq!(info::encode(&expected), raw);
    }
    for v in doc["invalid"].as_array().unwrap() {
        assert!(info::parse_all(&unhex(v["hex"].as_str().unwrap())).is_err(), "{}", v["name"]);
    }
}
