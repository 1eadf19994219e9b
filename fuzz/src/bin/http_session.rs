//! Raw bytes on an HTTP connection to the gateway (hyper's server and the
//! gateway's mapping, in front of a core with an echo service under
//! `/echo/`). The first byte sets how the bytes are split into writes. The
//! client never closes its side: the gateway must end every connection on
//! its own (an answer, a refusal, its header or body timeout), and all it
//! writes must be HTTP responses.
#![no_main]

use cumulo_core::fuzzing;
use libfuzzer_sys::fuzz_target;

/// Limits small enough for the fuzzer to cross them.
const SETTINGS: &str = "max_body = 4096\nmax_header_size = 2048\nmax_headers = 16\ntimeout_ms = 1000";

fuzz_target!(|data: &[u8]| {
    let Some((&split, input)) = data.split_first() else { return };
    let settings: toml::Table = SETTINGS.parse().unwrap();
    let out = fuzzing::run(async {
        let core = fuzzing::start_core(fuzzing::small_limits()).await;
        fuzzing::http_session(&core, &settings, input, split as usize + 1).await
    });
    let out = out.unwrap_or_else(|partial| {
        panic!("the gateway left the connection open; it wrote {:?}", String::from_utf8_lossy(&partial))
    });
    assert!(out.is_empty() || out.starts_with(b"HTTP/1."), "not an HTTP response: {:?}", String::from_utf8_lossy(&out));
});
