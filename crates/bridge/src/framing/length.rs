//! `framing = "length"`: each message after its length, 4 bytes big-endian.

use crate::BridgeError;
use bytes::{Buf, Bytes, BytesMut};

/// The length prefix's size in bytes.
pub const PREFIX: usize = 4;

#[derive(Debug)]
pub struct LengthDecoder {
    max: usize,
    state: State,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Waiting for the 4 bytes of a prefix.
    Prefix,
    /// Prefix read: waiting for this many bytes of body.
    Body(usize),
}

impl LengthDecoder {
    pub fn new(max: usize) -> LengthDecoder {
        LengthDecoder { max, state: State::Prefix }
    }

    pub fn next(&mut self, buf: &mut BytesMut) -> Result<Option<Bytes>, BridgeError> {
        if self.state == State::Prefix {
            if buf.len() < PREFIX {
                return Ok(None);
            }
            let n = buf.get_u32() as usize;
            if n == 0 {
                return Err(BridgeError::ZeroLength);
            }
            if n > self.max {
                return Err(BridgeError::TooLong { max: self.max });
            }
            // Checked against max_message first: the reservation is bounded.
            buf.reserve(n.saturating_sub(buf.len()));
            self.state = State::Body(n);
        }
        match self.state {
            State::Body(n) if buf.len() >= n => {
                self.state = State::Prefix;
                Ok(Some(buf.split_to(n).freeze()))
            }
            _ => Ok(None),
        }
    }

    pub fn finish(&mut self, buf: &mut BytesMut) -> Result<Option<Bytes>, BridgeError> {
        if let Some(m) = self.next(buf)? {
            return Ok(Some(m));
        }
        if buf.is_empty() && self.state == State::Prefix {
            return Ok(None);
        }
        Err(BridgeError::Truncated)
    }
}
