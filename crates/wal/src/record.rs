//! The record frame: `[len: u32 LE][crc32: u32 LE][payload]`.
//!
//! The checksum (CRC-32/ISO-HDLC, `crc32fast`) covers the four length bytes
//! and then the payload. Covering the length means a corrupted length is
//! caught like a corrupted payload, and a zero-filled tail (what some file
//! systems show after a crash that extended the file but lost its data)
//! does not read back as a run of valid empty records: the checksum of an
//! empty payload alone is 0, but that of `[0, 0, 0, 0]` is not.

/// Bytes before each payload.
pub(crate) const FRAME_LEN: u64 = 8;

/// The largest payload the format allows; a length field above it is
/// reported as impossible during recovery rather than read.
pub(crate) const MAX_PAYLOAD: u64 = 1 << 30;

/// Bytes a record of `payload_len` takes in a segment.
pub(crate) fn encoded_len(payload_len: usize) -> u64 {
    FRAME_LEN + payload_len as u64
}

pub(crate) fn checksum(len_bytes: [u8; 4], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&len_bytes);
    h.update(payload);
    h.finalize()
}

/// Appends the framed record to `buf`. The caller has checked that the
/// payload is at most `MAX_PAYLOAD`, so the length fits in a `u32`.
pub(crate) fn encode(buf: &mut Vec<u8>, payload: &[u8]) {
    let len_bytes = u32::try_from(payload.len()).unwrap_or(u32::MAX).to_le_bytes();
    buf.extend_from_slice(&len_bytes);
    buf.extend_from_slice(&checksum(len_bytes, payload).to_le_bytes());
    buf.extend_from_slice(payload);
}

/// A frame header read back from disk.
pub(crate) struct Frame {
    pub(crate) len: u64,
    len_bytes: [u8; 4],
    crc: u32,
}

impl Frame {
    pub(crate) fn parse(b: [u8; 8]) -> Frame {
        let len_bytes = [b[0], b[1], b[2], b[3]];
        Frame {
            len: u64::from(u32::from_le_bytes(len_bytes)),
            len_bytes,
            crc: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        }
    }

    pub(crate) fn matches(&self, payload: &[u8]) -> bool {
        checksum(self.len_bytes, payload) == self.crc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_zeroes_do_not_validate() {
        let mut buf = Vec::new();
        encode(&mut buf, b"hello");
        assert_eq!(buf.len() as u64, encoded_len(5));
        let f = Frame::parse(buf[..8].try_into().unwrap());
        assert_eq!(f.len, 5);
        assert!(f.matches(&buf[8..]));
        assert!(!f.matches(b"hellp"));

        let zero = Frame::parse([0; 8]);
        assert_eq!(zero.len, 0);
        assert!(!zero.matches(&[]), "a zeroed frame must not pass as an empty record");
    }
}
