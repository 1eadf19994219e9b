//! Encoding: append whole frames (length prefix included) to a buffer.
//!
//! Each encoder reserves the length prefix, writes the fields, then patches
//! the length, so a frame costs one pass and no temporary allocation.

use crate::frame::{kind, *};
use crate::TransId;

/// Starts a frame of type `ty`; returns where its length prefix is.
#[inline]
fn begin(out: &mut Vec<u8>, ty: u8) -> usize {
    let at = out.len();
    out.extend_from_slice(&[0, 0, 0, 0, ty]);
    at
}

#[inline]
fn finish(out: &mut [u8], at: usize) {
    let len = (out.len() - at - 4) as u32;
    out[at..at + 4].copy_from_slice(&len.to_le_bytes());
}

#[inline]
fn str_(out: &mut Vec<u8>, s: &str) {
    // Names, patterns and messages are limited to u16 lengths; a longer one is
    // cut at a character boundary rather than corrupting the frame.
    let mut n = s.len().min(u16::MAX as usize);
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    out.extend_from_slice(&(n as u16).to_le_bytes());
    out.extend_from_slice(&s.as_bytes()[..n]);
}

#[inline]
fn bytes_(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

#[inline]
fn tid_(out: &mut Vec<u8>, t: &TransId) {
    out.extend_from_slice(&t.0);
}

pub fn encode_hello(out: &mut Vec<u8>, h: &Hello) {
    let at = begin(out, kind::HELLO);
    out.extend_from_slice(&h.version.to_le_bytes());
    out.extend_from_slice(&h.window.to_le_bytes());
    out.extend_from_slice(&h.thread_index.to_le_bytes());
    str_(out, h.token);
    str_(out, h.prefix);
    finish(out, at);
}

/// SUBSCRIBE, UNSUBSCRIBE or SUBSCRIBE_COUNT (`ty` from [`kind`]).
pub fn encode_control(out: &mut Vec<u8>, ty: u8, c: &Control) {
    let at = begin(out, ty);
    out.extend_from_slice(&c.req_id.to_le_bytes());
    str_(out, c.pattern);
    finish(out, at);
}

/// SEND_ASYNC, SEND_SYNC, MCAST_ASYNC or FORWARD (`ty` from [`kind`]).
pub fn encode_send(out: &mut Vec<u8>, ty: u8, s: &Send) {
    let at = begin(out, ty);
    tid_(out, &s.trans_id);
    out.extend_from_slice(&s.timeout.to_le_bytes());
    out.push(s.priority as u8);
    out.push(s.flags);
    str_(out, s.name);
    bytes_(out, s.request_info);
    bytes_(out, s.request);
    finish(out, at);
}

/// RETURN or RESPONSE (`ty` from [`kind`]).
pub fn encode_return(out: &mut Vec<u8>, ty: u8, r: &Return) {
    let at = begin(out, ty);
    tid_(out, &r.trans_id);
    out.extend_from_slice(&r.status.to_le_bytes());
    bytes_(out, r.response_info);
    bytes_(out, r.response);
    finish(out, at);
}

/// PING or PONG.
pub fn encode_ping(out: &mut Vec<u8>, ty: u8, nonce: u64) {
    let at = begin(out, ty);
    out.extend_from_slice(&nonce.to_le_bytes());
    finish(out, at);
}

pub fn encode_goodbye(out: &mut Vec<u8>) {
    let at = begin(out, kind::GOODBYE);
    finish(out, at);
}

pub fn encode_welcome(out: &mut Vec<u8>, w: &Welcome) {
    let at = begin(out, kind::WELCOME);
    out.extend_from_slice(&w.version.to_le_bytes());
    for v in [
        w.node_id,
        w.instance_id,
        w.process_index,
        w.process_count,
        w.thread_count,
        w.window,
        w.max_frame,
        w.timeout_async,
        w.timeout_sync,
        w.timeout_terminate,
    ] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.push(w.priority_default as u8);
    out.extend_from_slice(&w.keepalive.to_le_bytes());
    str_(out, w.prefix);
    finish(out, at);
}

pub fn encode_request(out: &mut Vec<u8>, r: &Request) {
    let at = begin(out, kind::REQUEST);
    tid_(out, &r.trans_id);
    out.extend_from_slice(&r.timeout.to_le_bytes());
    out.push(r.priority as u8);
    out.push(r.flags);
    out.extend_from_slice(&r.source.to_le_bytes());
    str_(out, r.name);
    str_(out, r.pattern);
    bytes_(out, r.request_info);
    bytes_(out, r.request);
    finish(out, at);
}

pub fn encode_reply(out: &mut Vec<u8>, r: &Reply) {
    let at = begin(out, kind::REPLY);
    out.extend_from_slice(&r.req_id.to_le_bytes());
    out.extend_from_slice(&r.status.to_le_bytes());
    out.extend_from_slice(&r.value.to_le_bytes());
    str_(out, r.message);
    finish(out, at);
}

pub fn encode_mcast_sent(out: &mut Vec<u8>, call: &TransId, ids: &[TransId]) {
    let at = begin(out, kind::MCAST_SENT);
    tid_(out, call);
    out.extend_from_slice(&(ids.len() as u32).to_le_bytes());
    for id in ids {
        tid_(out, id);
    }
    finish(out, at);
}

pub fn encode_terminate(out: &mut Vec<u8>, timeout: u32) {
    let at = begin(out, kind::TERMINATE);
    out.extend_from_slice(&timeout.to_le_bytes());
    finish(out, at);
}

pub fn encode_error(out: &mut Vec<u8>, status: u16, message: &str) {
    let at = begin(out, kind::ERROR);
    out.extend_from_slice(&status.to_le_bytes());
    str_(out, message);
    finish(out, at);
}

/// Encodes any decoded frame (used by tests and tools; hot paths call the
/// specific encoders).
pub fn encode_frame(out: &mut Vec<u8>, f: &Frame) {
    match f {
        Frame::Hello(h) => encode_hello(out, h),
        Frame::Subscribe(c) => encode_control(out, kind::SUBSCRIBE, c),
        Frame::Unsubscribe(c) => encode_control(out, kind::UNSUBSCRIBE, c),
        Frame::SubscribeCount(c) => encode_control(out, kind::SUBSCRIBE_COUNT, c),
        Frame::SendAsync(s) => encode_send(out, kind::SEND_ASYNC, s),
        Frame::SendSync(s) => encode_send(out, kind::SEND_SYNC, s),
        Frame::McastAsync(s) => encode_send(out, kind::MCAST_ASYNC, s),
        Frame::Forward(s) => encode_send(out, kind::FORWARD, s),
        Frame::Return(r) => encode_return(out, kind::RETURN, r),
        Frame::Ping(n) => encode_ping(out, kind::PING, *n),
        Frame::Pong(n) => encode_ping(out, kind::PONG, *n),
        Frame::Goodbye => encode_goodbye(out),
        Frame::Welcome(w) => encode_welcome(out, w),
        Frame::Request(r) => encode_request(out, r),
        Frame::Response(r) => encode_return(out, kind::RESPONSE, r),
        Frame::Reply(r) => encode_reply(out, r),
        Frame::McastSent(m) => {
            let ids: Vec<TransId> = m.ids().collect();
            encode_mcast_sent(out, &m.trans_id, &ids)
        }
        Frame::Terminate(t) => encode_terminate(out, *t),
        Frame::Error(e) => encode_error(out, e.status, e.message),
    }
}
