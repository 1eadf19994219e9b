//! What a CloudI-API process writes to the core (docs/CLOUDI.md): Erlang
//! external term format. Raw bytes through the term decoder and through the
//! message decoder built on it: no panic, no read past the input, and the
//! message decoder refuses whatever the term decoder refuses.
#![no_main]

use cumulo_core::cloudi::{etf, messages};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let term = etf::decode(data);
    let message = messages::decode(data);
    if term.is_err() {
        assert!(message.is_err(), "a message decoded from bytes that are not a term");
    }
    if let Ok(m) = message {
        let _ = m.name();
    }
});
