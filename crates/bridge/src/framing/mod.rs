//! How a byte stream is cut into messages and how answers are written back:
//! `line` (newline-terminated, `\r\n` tolerated) or `length` (a 4-byte
//! big-endian length before each message). Each decoder is a small state
//! machine over a read buffer; it never holds more than `max_message` bytes
//! of one message (plus its terminator or prefix) before refusing it.

mod length;
mod line;
#[cfg(test)]
mod tests;

use crate::BridgeError;
use bytes::{Bytes, BytesMut};
pub use length::LengthDecoder;
pub use line::LineDecoder;

/// The `framing` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    Line,
    Length,
}

impl Framing {
    pub fn decoder(self, max_message: usize) -> Decoder {
        match self {
            Framing::Line => Decoder::Line(LineDecoder::new(max_message)),
            Framing::Length => Decoder::Length(LengthDecoder::new(max_message)),
        }
    }

    /// Appends `body` framed: as is and `\n` (an answer holding a newline
    /// reads as several lines: binary answers want `length`), or after its
    /// length. A zero-length answer is an empty line or a zero prefix.
    pub fn encode(self, body: &[u8], out: &mut Vec<u8>) {
        match self {
            Framing::Line => {
                out.extend_from_slice(body);
                out.push(b'\n');
            }
            Framing::Length => {
                // The core carries no message of 4 GiB (core.max_frame is a u32).
                let n = u32::try_from(body.len()).unwrap_or(u32::MAX);
                out.extend_from_slice(&n.to_be_bytes());
                out.extend_from_slice(&body[..n as usize]);
            }
        }
    }
}

/// A decoder of either framing.
#[derive(Debug)]
pub enum Decoder {
    Line(LineDecoder),
    Length(LengthDecoder),
}

impl Decoder {
    /// The next whole message at the front of `buf` (taken out of it), or
    /// `None` until more bytes come.
    pub fn next(&mut self, buf: &mut BytesMut) -> Result<Option<Bytes>, BridgeError> {
        match self {
            Decoder::Line(d) => d.next(buf),
            Decoder::Length(d) => d.next(buf),
        }
    }

    /// The peer closed its side: what is left in `buf` is a last message
    /// (a line without its newline) or a truncated one.
    pub fn finish(&mut self, buf: &mut BytesMut) -> Result<Option<Bytes>, BridgeError> {
        match self {
            Decoder::Line(d) => d.finish(buf),
            Decoder::Length(d) => d.finish(buf),
        }
    }
}
