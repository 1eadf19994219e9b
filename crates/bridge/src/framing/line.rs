//! `framing = "line"`: a message ends at `\n`; a `\r` before it is dropped.

use crate::BridgeError;
use bytes::{Bytes, BytesMut};

#[derive(Debug)]
pub struct LineDecoder {
    max: usize,
    /// Bytes of the buffer already searched for `\n`: a line that arrives
    /// a byte at a time is scanned once, not once per byte.
    searched: usize,
}

impl LineDecoder {
    pub fn new(max: usize) -> LineDecoder {
        LineDecoder { max, searched: 0 }
    }

    pub fn next(&mut self, buf: &mut BytesMut) -> Result<Option<Bytes>, BridgeError> {
        match buf[self.searched..].iter().position(|b| *b == b'\n') {
            Some(i) => {
                let end = self.searched + i;
                self.searched = 0;
                let mut line = buf.split_to(end + 1);
                line.truncate(end);
                self.take(line).map(Some)
            }
            None => {
                self.searched = buf.len();
                // The line so far, less a `\r` that may end it, is too long.
                let cr = usize::from(buf.last() == Some(&b'\r'));
                if buf.len() - cr > self.max {
                    return Err(BridgeError::TooLong { max: self.max });
                }
                Ok(None)
            }
        }
    }

    pub fn finish(&mut self, buf: &mut BytesMut) -> Result<Option<Bytes>, BridgeError> {
        if let Some(line) = self.next(buf)? {
            return Ok(Some(line));
        }
        self.searched = 0;
        if buf.is_empty() {
            return Ok(None);
        }
        let line = buf.split();
        self.take(line).map(Some)
    }

    fn take(&self, mut line: BytesMut) -> Result<Bytes, BridgeError> {
        if line.last() == Some(&b'\r') {
            line.truncate(line.len() - 1);
        }
        if line.len() > self.max {
            return Err(BridgeError::TooLong { max: self.max });
        }
        Ok(line.freeze())
    }
}
