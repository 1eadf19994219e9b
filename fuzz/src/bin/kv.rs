//! The key/value encoding of request_info and response_info (PROTOCOL.md
//! 5). Raw bytes: the parser never panics nor reads past the buffer, a
//! buffer that parses encodes back to itself, and `get` agrees with the
//! parsed pairs. Structured: pairs without NUL survive encode then parse.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use cumulo_proto::info;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(pairs) = info::parse_all(data) {
        assert_eq!(info::encode(&pairs), data);
        if let Some((k, v)) = pairs.first() {
            let first = pairs.iter().find(|(key, _)| key == k).map(|(_, v)| *v);
            assert_eq!(info::get(data, k), first);
            assert_eq!(first, Some(*v));
        }
    } else {
        // Only one error, and after it nothing more.
        let items: Vec<_> = info::parse(data).collect();
        assert!(items.last().is_some_and(Result::is_err));
        assert_eq!(items.iter().filter(|r| r.is_err()).count(), 1);
    }
    let Ok(pairs) = Vec::<(Vec<u8>, Vec<u8>)>::arbitrary(&mut Unstructured::new(data)) else { return };
    let clean: Vec<(Vec<u8>, Vec<u8>)> = pairs
        .into_iter()
        .map(|(k, v)| (k.into_iter().filter(|&b| b != 0).collect(), v.into_iter().filter(|&b| b != 0).collect()))
        .collect();
    let buf = info::encode(&clean);
    let back: Vec<(Vec<u8>, Vec<u8>)> =
        info::parse_all(&buf).unwrap().into_iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
    assert_eq!(back, clean);
});
