//! Decoding: a bounds-checked cursor over one frame. Every read checks the
//! remaining length first, so no input can make it read past the frame.

use crate::frame::{kind, *};
use crate::{Status, TransId, LEN_PREFIX};
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The length prefix announces more than the limit allows.
    TooLarge { len: u32, max: u32 },
    /// A zero length, unknown type, truncated or trailing bytes, bad UTF-8.
    Malformed(String),
}

impl DecodeError {
    pub fn status(&self) -> Status {
        match self {
            DecodeError::TooLarge { .. } => Status::TooLarge,
            DecodeError::Malformed(_) => Status::Malformed,
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::TooLarge { len, max } => {
                write!(f, "frame of {len} bytes is over the limit of {max}")
            }
            DecodeError::Malformed(why) => write!(f, "malformed frame: {why}"),
        }
    }
}
impl std::error::Error for DecodeError {}

fn malformed(why: impl Into<String>) -> DecodeError {
    DecodeError::Malformed(why.into())
}

/// Looks at the start of a read buffer: `Ok(Some(n))` when a whole frame of
/// `n` bytes (length prefix included) is there, `Ok(None)` when more bytes are
/// needed, and an error as soon as the length prefix is invalid, before its
/// body is read.
pub fn next_frame_len(buf: &[u8], max_frame: u32) -> Result<Option<usize>, DecodeError> {
    if buf.len() < LEN_PREFIX {
        return Ok(None);
    }
    let len = u32::from_le_bytes(buf[..4].try_into().unwrap());
    if len == 0 {
        return Err(malformed("zero length"));
    }
    if len > max_frame {
        return Err(DecodeError::TooLarge { len, max: max_frame });
    }
    let total = LEN_PREFIX + len as usize;
    Ok((buf.len() >= total).then_some(total))
}

struct Cursor<'a> {
    buf: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], DecodeError> {
        if self.buf.len() < n {
            return Err(malformed(format!("truncated {what}")));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1, "u8")?[0])
    }
    fn i8(&mut self) -> Result<i8, DecodeError> {
        Ok(self.u8()? as i8)
    }
    fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.take(2, "u16")?.try_into().unwrap()))
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.take(4, "u32")?.try_into().unwrap()))
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.take(8, "u64")?.try_into().unwrap()))
    }
    fn tid(&mut self) -> Result<TransId, DecodeError> {
        Ok(TransId(self.take(16, "trans_id")?.try_into().unwrap()))
    }
    fn str(&mut self, what: &str) -> Result<&'a str, DecodeError> {
        let n = self.u16()? as usize;
        let raw = self.take(n, what)?;
        std::str::from_utf8(raw).map_err(|_| malformed(format!("{what} is not UTF-8")))
    }
    fn bytes(&mut self, what: &str) -> Result<&'a [u8], DecodeError> {
        let n = self.u32()? as usize;
        self.take(n, what)
    }
    fn send(&mut self) -> Result<Send<'a>, DecodeError> {
        Ok(Send {
            trans_id: self.tid()?,
            timeout: self.u32()?,
            priority: self.i8()?,
            flags: self.u8()?,
            name: self.str("name")?,
            request_info: self.bytes("request_info")?,
            request: self.bytes("request")?,
        })
    }
    fn ret(&mut self) -> Result<Return<'a>, DecodeError> {
        Ok(Return {
            trans_id: self.tid()?,
            status: self.u16()?,
            response_info: self.bytes("response_info")?,
            response: self.bytes("response")?,
        })
    }
    fn control(&mut self) -> Result<Control<'a>, DecodeError> {
        Ok(Control { req_id: self.u32()?, pattern: self.str("pattern")? })
    }
}

/// Decodes one frame: `frame` is the type byte and body (what follows the
/// length prefix). The body must be consumed exactly.
pub fn decode(frame: &[u8]) -> Result<Frame<'_>, DecodeError> {
    let (&ty, body) = frame.split_first().ok_or_else(|| malformed("empty frame"))?;
    let mut c = Cursor { buf: body };
    let f = match ty {
        kind::HELLO => Frame::Hello(Hello {
            version: c.u16()?,
            window: c.u32()?,
            thread_index: c.u32()?,
            token: c.str("token")?,
            prefix: c.str("prefix")?,
        }),
        kind::SUBSCRIBE => Frame::Subscribe(c.control()?),
        kind::UNSUBSCRIBE => Frame::Unsubscribe(c.control()?),
        kind::SUBSCRIBE_COUNT => Frame::SubscribeCount(c.control()?),
        kind::SEND_ASYNC => Frame::SendAsync(c.send()?),
        kind::SEND_SYNC => Frame::SendSync(c.send()?),
        kind::MCAST_ASYNC => Frame::McastAsync(c.send()?),
        kind::FORWARD => Frame::Forward(c.send()?),
        kind::RETURN => Frame::Return(c.ret()?),
        kind::PING => Frame::Ping(c.u64()?),
        kind::PONG => Frame::Pong(c.u64()?),
        kind::GOODBYE => Frame::Goodbye,
        kind::WELCOME => Frame::Welcome(Welcome {
            version: c.u16()?,
            node_id: c.u32()?,
            instance_id: c.u32()?,
            process_index: c.u32()?,
            process_count: c.u32()?,
            thread_count: c.u32()?,
            window: c.u32()?,
            max_frame: c.u32()?,
            timeout_async: c.u32()?,
            timeout_sync: c.u32()?,
            timeout_terminate: c.u32()?,
            priority_default: c.i8()?,
            keepalive: c.u32()?,
            prefix: c.str("prefix")?,
        }),
        kind::REQUEST => Frame::Request(Request {
            trans_id: c.tid()?,
            timeout: c.u32()?,
            priority: c.i8()?,
            flags: c.u8()?,
            source: c.u64()?,
            name: c.str("name")?,
            pattern: c.str("pattern")?,
            request_info: c.bytes("request_info")?,
            request: c.bytes("request")?,
        }),
        kind::RESPONSE => Frame::Response(c.ret()?),
        kind::REPLY => {
            Frame::Reply(Reply { req_id: c.u32()?, status: c.u16()?, value: c.u32()?, message: c.str("message")? })
        }
        kind::MCAST_SENT => {
            let trans_id = c.tid()?;
            let count = c.u32()? as usize;
            let len = count.checked_mul(16).ok_or_else(|| malformed("count overflows"))?;
            Frame::McastSent(McastSent { trans_id, trans_ids: c.take(len, "trans_ids")? })
        }
        kind::TERMINATE => Frame::Terminate(c.u32()?),
        kind::ERROR => Frame::Error(ErrorFrame { status: c.u16()?, message: c.str("message")? }),
        other => return Err(malformed(format!("unknown frame type 0x{other:02x}"))),
    };
    if !c.buf.is_empty() {
        return Err(malformed(format!("{} trailing bytes after {}", c.buf.len(), f.type_name())));
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_prefix_of_a_valid_frame_is_an_error_not_a_panic() {
        let mut out = Vec::new();
        crate::encode_request(
            &mut out,
            &Request {
                trans_id: TransId::new(1, 2, 3),
                timeout: 5,
                priority: -1,
                flags: 1,
                source: 9,
                name: "/a/b",
                pattern: "/a/*",
                request_info: b"k\0v\0",
                request: b"body",
            },
        );
        let body = &out[LEN_PREFIX..];
        assert!(decode(body).is_ok());
        for cut in 0..body.len() {
            assert!(decode(&body[..cut]).is_err(), "prefix of {cut} bytes decoded");
        }
    }

    #[test]
    fn frame_length_checks() {
        assert_eq!(next_frame_len(&[1, 0], 10), Ok(None));
        assert_eq!(next_frame_len(&[2, 0, 0, 0, 0x30], 10), Ok(None));
        assert_eq!(next_frame_len(&[1, 0, 0, 0, 0x32], 10), Ok(Some(5)));
        assert!(matches!(next_frame_len(&[0, 0, 0, 0], 10), Err(DecodeError::Malformed(_))));
        assert!(matches!(next_frame_len(&[11, 0, 0, 0], 10), Err(DecodeError::TooLarge { .. })));
    }
}
