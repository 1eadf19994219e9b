//! What a stream message of the queue holds: everything the queue keeps of
//! a request, in the payload (request_info may hold any byte, NULs
//! included, so nothing of the request travels in a header; the only
//! header of a request is `Nats-Msg-Id`, the idempotency key).
//!
//! Layout (integers little-endian, strings and byte strings with a u32
//! length): `CQJ1`, id (u64, 0: the stream sequence is the id), arrived_ms
//! (u64), expires_ms (u64, 0: none), timeout_ms (u32), priority (i8),
//! destination, reply_to, origin (the instance waiting for the answer in
//! `destination` mode, empty otherwise), request_info, then the body to
//! the end.

use cumulo_queue::shared::{Reader, Writer};
use cumulo_service::Status;

const MAGIC: &[u8; 4] = b"CQJ1";

/// A request as the stream keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The request's id once it has one (a replayed dead letter keeps its
    /// first id); 0 on the first publish: the stream sequence is the id.
    pub id: u64,
    pub arrived_ms: u64,
    pub expires_ms: u64,
    pub timeout_ms: u32,
    pub priority: i8,
    pub destination: String,
    pub reply_to: String,
    pub origin: String,
    pub request_info: Vec<u8>,
    pub body: Vec<u8>,
}

impl Message {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer(Vec::with_capacity(64 + self.request_info.len() + self.body.len() + self.destination.len()));
        w.raw(MAGIC);
        w.u64(self.id);
        w.u64(self.arrived_ms);
        w.u64(self.expires_ms);
        w.u32(self.timeout_ms);
        w.u8(self.priority as u8);
        for b in [self.destination.as_bytes(), self.reply_to.as_bytes(), self.origin.as_bytes(), &self.request_info] {
            w.bytes(b);
        }
        w.raw(&self.body);
        w.0
    }

    /// `None` for a payload the queue did not write.
    pub fn decode(b: &[u8]) -> Option<Message> {
        let mut r = Reader(b);
        if r.take(4)? != MAGIC {
            return None;
        }
        Some(Message {
            id: r.u64()?,
            arrived_ms: r.u64()?,
            expires_ms: r.u64()?,
            timeout_ms: r.u32()?,
            priority: r.u8()? as i8,
            destination: r.string()?,
            reply_to: r.string()?,
            origin: r.string()?,
            request_info: r.bytes()?.to_vec(),
            body: r.rest().to_vec(),
        })
    }
}

/// An answer passed from the node that delivered a request to the node
/// whose sender waits for it (`destination` mode): id (u64), status (u16),
/// response_info (u32 length), response to the end.
pub fn encode_answer(id: u64, status: Status, info: &[u8], body: &[u8]) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(14 + info.len() + body.len()));
    w.u64(id);
    w.u16(status.code());
    w.bytes(info);
    w.raw(body);
    w.0
}

pub fn decode_answer(b: &[u8]) -> Option<(u64, Status, Vec<u8>, Vec<u8>)> {
    let mut r = Reader(b);
    let id = r.u64()?;
    let status = Status::from_code(r.u16()?);
    let info = r.bytes()?.to_vec();
    Some((id, status, info, r.rest().to_vec()))
}

/// The `Nats-Msg-Id` of an idempotency key: the key itself when it is
/// printable ASCII (a header value cannot hold every byte), else `hex:` and
/// its bytes in hex; a key that itself starts with `hex:` is always hex, so
/// that two keys never share an id.
pub fn msg_id(key: &str) -> String {
    if !key.starts_with("hex:") && key.bytes().all(|b| (0x21..0x7f).contains(&b)) {
        return key.to_string();
    }
    let mut s = String::from("hex:");
    for b in key.bytes() {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_round_trips_with_any_bytes() {
        let m = Message {
            id: 0,
            arrived_ms: 1_700_000_000_000,
            expires_ms: 7,
            timeout_ms: 5000,
            priority: -3,
            destination: "/dest/x".into(),
            reply_to: "/r/".into(),
            origin: "abc".into(),
            request_info: b"k\0v\0".to_vec(),
            body: (0..=255u8).collect(),
        };
        assert_eq!(Message::decode(&m.encode()), Some(m.clone()));
        assert_eq!(Message::decode(b"nope"), None);
        assert_eq!(Message::decode(&m.encode()[..20]), None);
        let a = encode_answer(9, Status::Timeout, b"i\0j\0", b"\0body");
        assert_eq!(decode_answer(&a), Some((9, Status::Timeout, b"i\0j\0".to_vec(), b"\0body".to_vec())));
    }

    #[test]
    fn idempotency_keys_map_to_distinct_header_values() {
        assert_eq!(msg_id("order-7"), "order-7");
        assert_eq!(msg_id("a b"), "hex:612062");
        assert_eq!(msg_id("a\r\nb"), "hex:610d0a62");
        assert_ne!(msg_id("hex:00"), "hex:00");
    }
}
