//! The frames the core writes to an instance (or to another node), one
//! function per kind: each kind is encoded in this one place, whoever sends
//! it (routing, the core's state, the listener, the cluster link). They
//! append to an output buffer, as `cumulo_proto`'s encoders do; an outbox
//! passes its buffer (`Outbox::push(|b| frames::ping(b, nonce))`).

use cumulo_proto::{kind, Reply, Request, Return, Status, TransId, Welcome};

/// `RESPONSE`: the answer to a request, to its sender.
pub fn response(b: &mut Vec<u8>, trans_id: TransId, status: Status, info: &[u8], body: &[u8]) {
    let r = Return { trans_id, status: status.code(), response_info: info, response: body };
    cumulo_proto::encode_return(b, kind::RESPONSE, &r);
}

/// `REQUEST`: a request handed to the instance that handles it.
pub fn request(b: &mut Vec<u8>, r: &Request<'_>) {
    cumulo_proto::encode_request(b, r);
}

/// `REPLY`: the answer to a control frame (subscribe, unsubscribe, count).
pub fn reply(b: &mut Vec<u8>, req_id: u32, status: Status, value: u32, message: &str) {
    cumulo_proto::encode_reply(b, &Reply { req_id, status: status.code(), value, message });
}

/// `MCAST_SENT`: the trans_ids of a multicast's copies, to its sender.
pub fn mcast_sent(b: &mut Vec<u8>, trans_id: &TransId, copies: &[TransId]) {
    cumulo_proto::encode_mcast_sent(b, trans_id, copies);
}

/// `WELCOME`: the handshake accepted.
pub fn welcome(b: &mut Vec<u8>, w: &Welcome<'_>) {
    cumulo_proto::encode_welcome(b, w);
}

/// `ERROR`: why the core closes the connection.
pub fn error(b: &mut Vec<u8>, status: Status, message: &str) {
    cumulo_proto::encode_error(b, status.code(), message);
}

/// `PING`: the keep-alive round.
pub fn ping(b: &mut Vec<u8>, nonce: u64) {
    cumulo_proto::encode_ping(b, kind::PING, nonce);
}

/// `PONG`: the answer to an instance's `PING`.
pub fn pong(b: &mut Vec<u8>, nonce: u64) {
    cumulo_proto::encode_ping(b, kind::PONG, nonce);
}

/// `TERMINATE`: stop taking requests, finish within `timeout_ms`.
pub fn terminate(b: &mut Vec<u8>, timeout_ms: u32) {
    cumulo_proto::encode_terminate(b, timeout_ms);
}
