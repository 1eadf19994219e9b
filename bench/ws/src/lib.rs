//! What the programs of bench/websocket share: the WebSocket settings, the
//! tick a fan-out sends (a sequence number and the time it was sent) and the
//! clock it is read by.
//!
//! The sender and the receiver are different processes, so the time is the
//! system's wall clock (nanoseconds since the Unix epoch): one clock on one
//! machine, read the same way on both sides.

use std::time::{SystemTime, UNIX_EPOCH};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

/// The read chunk of every connection here, as in the gateway (the core's
/// WebSocket session, `READ_CHUNK`): tungstenite zero-fills its chunk
/// before every read (up to the chunk's size), and its default, 128 KiB,
/// made a client reading one tick on each of 10,000 connections clear up
/// to 1.3 GB per tick, so the fan-out figures measured the client's memset
/// as well as the server.
pub const READ_CHUNK: usize = 4 * 1024;

/// The settings of every WebSocket connection here: tungstenite's defaults
/// with the read chunk above.
pub fn config() -> WebSocketConfig {
    WebSocketConfig::default().read_buffer_size(READ_CHUNK)
}

/// Nanoseconds since the Unix epoch.
pub fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// A tick's text: `"<seq> <sent_ns>"`.
pub fn tick_body(seq: u64) -> String {
    format!("{seq} {}", now_ns())
}

/// The sequence number and send time of a tick's text.
pub fn parse_tick(text: &str) -> Option<(u64, u64)> {
    let (seq, sent) = text.split_once(' ')?;
    Some((seq.parse().ok()?, sent.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tick_reads_back() {
        let (seq, sent) = parse_tick(&tick_body(42)).unwrap();
        assert_eq!(seq, 42);
        assert!(sent > 0 && sent <= now_ns());
        assert_eq!(parse_tick("7"), None);
        assert_eq!(parse_tick("x 1"), None);
    }
}
