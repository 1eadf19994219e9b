//! CloudI's external-service protocol, both directions.
//!
//! API → core: each message is an Erlang term (see `etf`), e.g.
//! `{send_sync, Name, RequestInfo, Request, Timeout, Priority}`.
//! Core → API: a command code then fields, integers in native byte order,
//! strings with a size that counts their NUL terminator, binaries with a size
//! that does not count the NUL that follows them.
//! Both directions frame each message with a 4-byte big-endian length (the
//! `local` and `tcp` protocols alike).

use super::etf::{self, Term};
use cumulo_proto::TransId;
use std::borrow::Cow;

pub const INIT: u32 = 1;
pub const SEND_ASYNC: u32 = 2;
pub const SEND_SYNC: u32 = 3;
pub const RECV_ASYNC: u32 = 4;
pub const RETURN_ASYNC: u32 = 5;
pub const RETURN_SYNC: u32 = 6;
pub const RETURNS_ASYNC: u32 = 7;
// 8 is KEEPALIVE, which CloudI sends to external services over UDP only
// (connection.rs): never written here.
pub const SUBSCRIBE_COUNT: u32 = 10;
pub const TERM: u32 = 11;

/// Bytes of the length prefix of every message.
pub const LEN_PREFIX: usize = 4;

/// The null trans_id: how CloudI says "timed out" in a response.
pub const NULL_TRANS_ID: TransId = TransId([0; 16]);

/// A request as an API sends it (send_*, mcast_async, forward_*).
#[derive(Debug, PartialEq)]
pub struct ApiSend<'a> {
    pub name: Cow<'a, [u8]>,
    pub request_info: &'a [u8],
    pub request: &'a [u8],
    pub timeout: u32,
    pub priority: i8,
}

#[derive(Debug, PartialEq)]
pub enum ApiMessage<'a> {
    Init,
    Polling,
    Keepalive,
    Subscribe(Cow<'a, [u8]>),
    Unsubscribe(Cow<'a, [u8]>),
    SubscribeCount(Cow<'a, [u8]>),
    SendAsync(ApiSend<'a>),
    SendSync(ApiSend<'a>),
    McastAsync(ApiSend<'a>),
    /// forward_async and forward_sync: the trans_id of the request passed on.
    Forward(ApiSend<'a>, TransId),
    /// return_async and return_sync.
    Return {
        response_info: &'a [u8],
        response: &'a [u8],
        trans_id: TransId,
    },
    RecvAsync {
        timeout: u32,
        trans_id: TransId,
        consume: bool,
    },
    Shutdown(Cow<'a, [u8]>),
}

impl ApiMessage<'_> {
    pub fn name(&self) -> &'static str {
        match self {
            ApiMessage::Init => "init",
            ApiMessage::Polling => "polling",
            ApiMessage::Keepalive => "keepalive",
            ApiMessage::Subscribe(_) => "subscribe",
            ApiMessage::Unsubscribe(_) => "unsubscribe",
            ApiMessage::SubscribeCount(_) => "subscribe_count",
            ApiMessage::SendAsync(_) => "send_async",
            ApiMessage::SendSync(_) => "send_sync",
            ApiMessage::McastAsync(_) => "mcast_async",
            ApiMessage::Forward(..) => "forward",
            ApiMessage::Return { .. } => "return",
            ApiMessage::RecvAsync { .. } => "recv_async",
            ApiMessage::Shutdown(_) => "shutdown",
        }
    }
}

/// Decodes one message from an API (the bytes after the length prefix).
pub fn decode(data: &[u8]) -> Result<ApiMessage<'_>, String> {
    let term = etf::decode(data).map_err(|e| e.to_string())?;
    let items = match term {
        Term::Atom(b"init") => return Ok(ApiMessage::Init),
        Term::Atom(b"polling") => return Ok(ApiMessage::Polling),
        Term::Atom(b"keepalive") => return Ok(ApiMessage::Keepalive),
        Term::Tuple(items) if !items.is_empty() => items,
        other => return Err(format!("unexpected message {}", short(&other))),
    };
    let Term::Atom(kind) = items[0] else { return Err(format!("message tag is not an atom: {}", short(&items[0]))) };
    let kind_name = String::from_utf8_lossy(kind).into_owned();
    let f = Fields { items: &items, kind: &kind_name };
    let msg = match (kind, items.len()) {
        (b"subscribe", 2) => ApiMessage::Subscribe(f.string(1)?),
        (b"unsubscribe", 2) => ApiMessage::Unsubscribe(f.string(1)?),
        (b"subscribe_count", 2) => ApiMessage::SubscribeCount(f.string(1)?),
        (b"send_async", 6) => ApiMessage::SendAsync(f.send()?),
        (b"send_sync", 6) => ApiMessage::SendSync(f.send()?),
        (b"mcast_async", 6) => ApiMessage::McastAsync(f.send()?),
        (b"forward_async" | b"forward_sync", 8) => ApiMessage::Forward(f.send()?, f.trans_id(6)?),
        (b"return_async" | b"return_sync", 8) => {
            ApiMessage::Return { response_info: f.binary(3)?, response: f.binary(4)?, trans_id: f.trans_id(6)? }
        }
        (b"recv_async", 4) => ApiMessage::RecvAsync {
            timeout: f.uint(1)?,
            trans_id: f.trans_id(2)?,
            consume: f.items[3].as_bool().ok_or_else(|| f.bad(3, "a boolean"))?,
        },
        (b"shutdown", 2) => ApiMessage::Shutdown(f.string(1)?),
        (_, n) => return Err(format!("unknown message {{{kind_name}, ...}} with {n} elements")),
    };
    Ok(msg)
}

struct Fields<'t, 'a> {
    items: &'t [Term<'a>],
    kind: &'t str,
}

impl<'a> Fields<'_, 'a> {
    fn bad(&self, i: usize, what: &str) -> String {
        format!("{}: element {} is not {what}: {}", self.kind, i + 1, short(&self.items[i]))
    }
    fn string(&self, i: usize) -> Result<Cow<'a, [u8]>, String> {
        self.items[i].string_bytes().ok_or_else(|| self.bad(i, "a string"))
    }
    fn binary(&self, i: usize) -> Result<&'a [u8], String> {
        match self.items[i] {
            Term::Bytes(b) => Ok(b),
            _ => Err(self.bad(i, "a binary")),
        }
    }
    fn uint(&self, i: usize) -> Result<u32, String> {
        self.items[i].as_int().and_then(|v| u32::try_from(v).ok()).ok_or_else(|| self.bad(i, "a timeout (0 .. 2^32-1)"))
    }
    fn trans_id(&self, i: usize) -> Result<TransId, String> {
        let b = self.binary(i)?;
        b.try_into().map(TransId).map_err(|_| self.bad(i, "a 16-byte trans_id"))
    }
    /// `{_, Name, RequestInfo, Request, Timeout, Priority, ...}`.
    fn send(&self) -> Result<ApiSend<'a>, String> {
        let priority = self.items[5]
            .as_int()
            .and_then(|v| i8::try_from(v).ok())
            .ok_or_else(|| self.bad(5, "a priority (-128 .. 127)"))?;
        Ok(ApiSend {
            name: self.string(1)?,
            request_info: self.binary(2)?,
            request: self.binary(3)?,
            timeout: self.uint(4)?,
            priority,
        })
    }
}

/// A term for an error message, cut short.
fn short(t: &Term) -> String {
    let mut s = format!("{t:?}");
    if s.len() > 80 {
        let mut cut = 77;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("...");
    }
    s
}

/// Writes one length-prefixed message to `out`.
fn message(out: &mut Vec<u8>, code: u32, body: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend_from_slice(&[0; LEN_PREFIX]);
    out.extend_from_slice(&code.to_ne_bytes());
    body(out);
    let len = (out.len() - start - LEN_PREFIX) as u32;
    out[start..start + LEN_PREFIX].copy_from_slice(&len.to_be_bytes());
}

/// A string: size counting the NUL, the bytes, the NUL.
fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(&(s.len() as u32 + 1).to_ne_bytes());
    out.extend_from_slice(s);
    out.push(0);
}

/// A binary: size, the bytes, a NUL not counted.
fn put_bin(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_ne_bytes());
    out.extend_from_slice(b);
    out.push(0);
}

pub struct Init<'a> {
    pub process_index: u32,
    pub process_count: u32,
    pub prefix: &'a str,
    pub timeout_initialize: u32,
    pub timeout_async: u32,
    pub timeout_sync: u32,
    pub timeout_terminate: u32,
    pub priority_default: i8,
}

pub fn encode_init(out: &mut Vec<u8>, i: &Init) {
    message(out, INIT, |b| {
        b.extend_from_slice(&i.process_index.to_ne_bytes());
        b.extend_from_slice(&i.process_count.to_ne_bytes());
        b.extend_from_slice(&i.process_count.to_ne_bytes()); // count_process_max
        b.extend_from_slice(&i.process_count.to_ne_bytes()); // count_process_min
        put_str(b, i.prefix.as_bytes());
        b.extend_from_slice(&i.timeout_initialize.to_ne_bytes());
        b.extend_from_slice(&i.timeout_async.to_ne_bytes());
        b.extend_from_slice(&i.timeout_sync.to_ne_bytes());
        b.extend_from_slice(&i.timeout_terminate.to_ne_bytes());
        b.push(i.priority_default as u8);
        b.push(1); // fatal_exceptions: CloudI's default (the Rust API refuses false)
        b.extend_from_slice(&(-1i32).to_ne_bytes()); // bind: no CPU binding
    });
}

/// A request delivered to the API (SEND_ASYNC or SEND_SYNC).
pub struct Request<'a> {
    pub sync: bool,
    pub name: &'a str,
    pub pattern: &'a str,
    pub request_info: &'a [u8],
    pub request: &'a [u8],
    pub timeout: u32,
    pub priority: i8,
    pub trans_id: &'a TransId,
    /// The sender's `node_id << 32 | instance_id`.
    pub source: u64,
}

pub fn encode_request(out: &mut Vec<u8>, r: &Request) {
    message(out, if r.sync { SEND_SYNC } else { SEND_ASYNC }, |b| {
        put_str(b, r.name.as_bytes());
        put_str(b, r.pattern.as_bytes());
        put_bin(b, r.request_info);
        put_bin(b, r.request);
        b.extend_from_slice(&r.timeout.to_ne_bytes());
        b.push(r.priority as u8);
        b.extend_from_slice(&r.trans_id.0);
        let size_at = b.len();
        b.extend_from_slice(&[0; 4]);
        etf::encode_pid(b, (r.source >> 32) as u32, r.source as u32);
        let size = (b.len() - size_at - 4) as u32;
        b[size_at..size_at + 4].copy_from_slice(&size.to_ne_bytes());
    });
}

/// The answer to send_sync (`RETURN_SYNC`) or recv_async (`RECV_ASYNC`).
pub fn encode_response(out: &mut Vec<u8>, code: u32, response_info: &[u8], response: &[u8], trans_id: &TransId) {
    message(out, code, |b| {
        put_bin(b, response_info);
        put_bin(b, response);
        b.extend_from_slice(&trans_id.0);
    });
}

/// The answer to send_async: the request's trans_id.
pub fn encode_return_async(out: &mut Vec<u8>, trans_id: &TransId) {
    message(out, RETURN_ASYNC, |b| b.extend_from_slice(&trans_id.0));
}

/// The answer to mcast_async: one trans_id per copy sent.
pub fn encode_returns_async(out: &mut Vec<u8>, trans_ids: &[u8]) {
    message(out, RETURNS_ASYNC, |b| {
        b.extend_from_slice(&((trans_ids.len() / 16) as u32).to_ne_bytes());
        b.extend_from_slice(trans_ids);
    });
}

pub fn encode_subscribe_count(out: &mut Vec<u8>, count: u32) {
    message(out, SUBSCRIBE_COUNT, |b| b.extend_from_slice(&count.to_ne_bytes()));
}

pub fn encode_term(out: &mut Vec<u8>) {
    message(out, TERM, |_| {});
}

#[cfg(test)]
mod tests;
