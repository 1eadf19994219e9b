//! Raw bytes on a WebSocket connection of the gateway: a valid upgrade on a
//! configured path, then the fuzzer's bytes as frames (the session's
//! bad-input path: tungstenite's frame parser, the limits, close codes,
//! messages turned into requests to the echo service). The first byte sets
//! how the bytes are split into writes. The client never closes: the
//! gateway must end the connection itself (close code, or the idle
//! timeout), answer the upgrade with 101, and write only well-formed,
//! unmasked server frames after it, whose text messages are the protocol's
//! JSON answers.
#![no_main]

use cumulo_core::fuzzing;
use libfuzzer_sys::fuzz_target;

const UPGRADE: &[u8] = b"GET /ws/a HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
/// Limits small enough for the fuzzer to cross them; protocol "id" so that
/// the JSON path is reached too.
const SETTINGS: &str = "[[websocket]]\npath = \"/ws/\"\nrequest_name = \"/echo/in\"\nprotocol = \"id\"\n\
max_message = 256\nmax_frame = 128\nmax_pending = 1024\nidle_timeout_ms = 200\nping_ms = 50";

fuzz_target!(|data: &[u8]| {
    let Some((&split, frames)) = data.split_first() else { return };
    let settings: toml::Table = SETTINGS.parse().unwrap();
    let input = [UPGRADE, frames].concat();
    let out = fuzzing::run(async {
        let core = fuzzing::start_core(fuzzing::small_limits()).await;
        fuzzing::http_session(&core, &settings, &input, split as usize + 1).await
    });
    let out = out.unwrap_or_else(|partial| {
        panic!("the gateway left the WebSocket open; it wrote {:?}", String::from_utf8_lossy(&partial))
    });
    assert!(out.starts_with(b"HTTP/1.1 101 "), "no 101: {:?}", String::from_utf8_lossy(&out));
    let end = out.windows(4).position(|w| w == b"\r\n\r\n").expect("the head ends") + 4;
    let frames = fuzzing::websocket_server_frames(&out[end..]).unwrap_or_else(|why| panic!("{why}: {:?}", &out[end..]));
    // Text frames are the protocol's answers and refusals: JSON, every one.
    for (_, text) in frames.iter().filter(|(opcode, _)| *opcode == 1) {
        if let Err(why) = fuzzing::websocket_protocol_answer(text) {
            panic!("{why}: {:?}", String::from_utf8_lossy(text));
        }
    }
});
