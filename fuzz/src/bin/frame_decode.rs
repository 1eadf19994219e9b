//! Raw bytes as a stream of frames, as the core's reader sees them: the
//! length check and the decoder of every frame type. Nothing may panic; a
//! frame that decodes must encode back to exactly its bytes (the encoding
//! is canonical); feeding the stream one byte at a time must find the same
//! frames as feeding it whole.
#![no_main]

use cumulo_proto::{decode, encode_frame, next_frame_len, DecodeError, Status, LEN_PREFIX};
use libfuzzer_sys::fuzz_target;

/// Small enough that the TOO_LARGE path is reached often.
const MAX_FRAME: u32 = 4096;

/// Frames (or the error) found in `buf` read as one stream.
fn frames(buf: &[u8]) -> (Vec<&[u8]>, Option<DecodeError>) {
    let mut found = Vec::new();
    let mut at = 0;
    loop {
        match next_frame_len(&buf[at..], MAX_FRAME) {
            Ok(Some(n)) => {
                assert!(n > LEN_PREFIX && at + n <= buf.len(), "a frame length past the buffer");
                found.push(&buf[at..at + n]);
                at += n;
            }
            Ok(None) => return (found, None),
            Err(e) => {
                assert!(matches!(e.status(), Status::Malformed | Status::TooLarge));
                return (found, Some(e));
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let (whole, error) = frames(data);
    for frame in &whole {
        match decode(&frame[LEN_PREFIX..]) {
            Ok(f) => {
                let mut again = Vec::new();
                encode_frame(&mut again, &f);
                assert_eq!(&again[..], *frame, "{} does not encode back to its bytes", f.type_name());
            }
            Err(e) => assert_eq!(e.status(), Status::Malformed, "{e}"),
        }
    }
    // Byte by byte: each frame is found as soon as its last byte arrives,
    // never earlier, and the stream's error as soon as the length is in.
    let mut start = 0;
    let mut seen = 0;
    for end in 0..=data.len() {
        match next_frame_len(&data[start..end], MAX_FRAME) {
            Ok(Some(n)) => {
                assert_eq!(start + n, end, "frame found before its last byte");
                assert_eq!(&data[start..end], whole[seen]);
                seen += 1;
                start = end;
            }
            Ok(None) => {}
            Err(e) => {
                assert_eq!(Some(e), error);
                assert_eq!(end - start, LEN_PREFIX, "error only once the length prefix is in");
                return;
            }
        }
    }
    assert_eq!(seen, whole.len());
    assert!(error.is_none());
});
