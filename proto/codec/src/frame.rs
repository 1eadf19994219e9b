//! The frames of protocol v1 (PROTOCOL.md 4), borrowing their variable-length
//! fields from the buffer they were decoded from.

use crate::TransId;

/// Type codes (PROTOCOL.md 4).
pub mod kind {
    pub const HELLO: u8 = 0x01;
    pub const SUBSCRIBE: u8 = 0x02;
    pub const UNSUBSCRIBE: u8 = 0x03;
    pub const SUBSCRIBE_COUNT: u8 = 0x04;
    pub const SEND_ASYNC: u8 = 0x10;
    pub const SEND_SYNC: u8 = 0x11;
    pub const MCAST_ASYNC: u8 = 0x12;
    pub const RETURN: u8 = 0x20;
    pub const FORWARD: u8 = 0x21;
    pub const PING: u8 = 0x30;
    pub const PONG: u8 = 0x31;
    pub const GOODBYE: u8 = 0x32;
    pub const WELCOME: u8 = 0x81;
    pub const REQUEST: u8 = 0x82;
    pub const RESPONSE: u8 = 0x83;
    pub const REPLY: u8 = 0x84;
    pub const MCAST_SENT: u8 = 0x85;
    pub const TERMINATE: u8 = 0x86;
    pub const ERROR: u8 = 0x87;
}

/// `SEND.flags` bit 0: wait for a subscriber instead of failing with NO_SERVICE.
pub const SEND_WAIT_FOR_SERVICE: u8 = 0x01;
/// `REQUEST.flags` bit 0: the sender used send_sync.
pub const REQUEST_SYNC: u8 = 0x01;
/// `REQUEST.flags` bit 1: a multicast copy.
pub const REQUEST_MCAST: u8 = 0x02;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello<'a> {
    pub version: u16,
    pub window: u32,
    pub thread_index: u32,
    pub token: &'a str,
    pub prefix: &'a str,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Control<'a> {
    pub req_id: u32,
    pub pattern: &'a str,
}

/// SEND_ASYNC, SEND_SYNC, MCAST_ASYNC and FORWARD share this layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Send<'a> {
    pub trans_id: TransId,
    pub timeout: u32,
    pub priority: i8,
    pub flags: u8,
    pub name: &'a str,
    pub request_info: &'a [u8],
    pub request: &'a [u8],
}

/// RETURN and RESPONSE share this layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Return<'a> {
    pub trans_id: TransId,
    pub status: u16,
    pub response_info: &'a [u8],
    pub response: &'a [u8],
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Welcome<'a> {
    pub version: u16,
    pub node_id: u32,
    pub instance_id: u32,
    pub process_index: u32,
    pub process_count: u32,
    pub thread_count: u32,
    pub window: u32,
    pub max_frame: u32,
    pub timeout_async: u32,
    pub timeout_sync: u32,
    pub timeout_terminate: u32,
    pub priority_default: i8,
    pub keepalive: u32,
    pub prefix: &'a str,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request<'a> {
    pub trans_id: TransId,
    pub timeout: u32,
    pub priority: i8,
    pub flags: u8,
    pub source: u64,
    pub name: &'a str,
    pub pattern: &'a str,
    pub request_info: &'a [u8],
    pub request: &'a [u8],
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply<'a> {
    pub req_id: u32,
    pub status: u16,
    pub value: u32,
    pub message: &'a str,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McastSent<'a> {
    pub trans_id: TransId,
    /// `count` trans_ids of 16 bytes each, back to back.
    pub trans_ids: &'a [u8],
}

impl McastSent<'_> {
    pub fn ids(&self) -> impl Iterator<Item = TransId> + '_ {
        self.trans_ids.chunks_exact(16).map(|c| TransId(c.try_into().unwrap()))
    }
    pub fn count(&self) -> usize {
        self.trans_ids.len() / 16
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorFrame<'a> {
    pub status: u16,
    pub message: &'a str,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame<'a> {
    Hello(Hello<'a>),
    Subscribe(Control<'a>),
    Unsubscribe(Control<'a>),
    SubscribeCount(Control<'a>),
    SendAsync(Send<'a>),
    SendSync(Send<'a>),
    McastAsync(Send<'a>),
    Forward(Send<'a>),
    Return(Return<'a>),
    Ping(u64),
    Pong(u64),
    Goodbye,
    Welcome(Welcome<'a>),
    Request(Request<'a>),
    Response(Return<'a>),
    Reply(Reply<'a>),
    McastSent(McastSent<'a>),
    Terminate(u32),
    Error(ErrorFrame<'a>),
}

impl Frame<'_> {
    /// The type name used in the spec and the vectors.
    pub fn type_name(&self) -> &'static str {
        match self {
            Frame::Hello(_) => "HELLO",
            Frame::Subscribe(_) => "SUBSCRIBE",
            Frame::Unsubscribe(_) => "UNSUBSCRIBE",
            Frame::SubscribeCount(_) => "SUBSCRIBE_COUNT",
            Frame::SendAsync(_) => "SEND_ASYNC",
            Frame::SendSync(_) => "SEND_SYNC",
            Frame::McastAsync(_) => "MCAST_ASYNC",
            Frame::Forward(_) => "FORWARD",
            Frame::Return(_) => "RETURN",
            Frame::Ping(_) => "PING",
            Frame::Pong(_) => "PONG",
            Frame::Goodbye => "GOODBYE",
            Frame::Welcome(_) => "WELCOME",
            Frame::Request(_) => "REQUEST",
            Frame::Response(_) => "RESPONSE",
            Frame::Reply(_) => "REPLY",
            Frame::McastSent(_) => "MCAST_SENT",
            Frame::Terminate(_) => "TERMINATE",
            Frame::Error(_) => "ERROR",
        }
    }
}
