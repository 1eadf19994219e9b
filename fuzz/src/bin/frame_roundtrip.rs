//! Structure-aware: any frame of protocol v1 (built by `arbitrary`),
//! encoded by the codec, decodes back to itself; every strict prefix of it
//! is incomplete or an error, never a different frame.
#![no_main]

use cumulo_fuzz::OwnedFrame;
use cumulo_proto::{decode, encode_frame, next_frame_len, LEN_PREFIX};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|model: OwnedFrame| {
    let frame = model.as_frame();
    let mut bytes = Vec::new();
    encode_frame(&mut bytes, &frame);
    assert_eq!(next_frame_len(&bytes, u32::MAX), Ok(Some(bytes.len())));
    let decoded = decode(&bytes[LEN_PREFIX..]).unwrap_or_else(|e| panic!("{}: {e}", frame.type_name()));
    assert_eq!(decoded, frame);
    for cut in LEN_PREFIX + 1..bytes.len() {
        assert_eq!(next_frame_len(&bytes[..cut], u32::MAX), Ok(None));
        assert!(decode(&bytes[LEN_PREFIX..cut]).is_err(), "{} cut at {cut} decoded", frame.type_name());
    }
});
