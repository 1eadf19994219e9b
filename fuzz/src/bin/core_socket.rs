//! Raw bytes on an instance connection, end to end through the core: the
//! handshake (HELLO), the reader (frames split across reads), routing, and
//! the writer, with an echo service under `/echo/`. The first byte sets how
//! the bytes are split into writes. Nothing may panic, and what the core
//! writes back must be whole, valid core-to-instance frames, an ERROR only
//! last.
#![no_main]

use cumulo_core::fuzzing;
use libfuzzer_sys::fuzz_target;
use std::time::Duration;

fuzz_target!(|data: &[u8]| {
    let Some((&split, input)) = data.split_first() else { return };
    let out = fuzzing::run(async {
        let core = fuzzing::start_core(fuzzing::small_limits()).await;
        fuzzing::socket_session(&core, input, split as usize + 1, Duration::from_secs(1)).await
    });
    cumulo_fuzz::check_core_output(&out, |_| {});
});
