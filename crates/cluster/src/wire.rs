//! What nodes say to each other over NATS.
//!
//! Two subjects per cloud (`<cloud>` is `cluster.name`):
//! - `cumulo.<cloud>.ctl`: the control plane, JSON (`Control`): heartbeats,
//!   subscription snapshots, requests for a snapshot, goodbyes. Small and
//!   rare, so readability wins over size.
//! - `cumulo.<cloud>.node.<node>`: the data plane, one per node: a header
//!   naming the sending node, then protocol v1 frames exactly as a socket
//!   carries them (REQUEST and RESPONSE, proto/PROTOCOL.md), several per
//!   message.

use serde::{Deserialize, Serialize};
use std::ops::Range;

pub fn control_subject(cloud: &str) -> String {
    format!("cumulo.{cloud}.ctl")
}

pub fn data_subject(cloud: &str, node: &str) -> String {
    format!("cumulo.{cloud}.node.{node}")
}

/// A control-plane message. `boot` tells incarnations of a node apart: a node
/// that restarts under the same name has a new one, and what was in flight
/// to the old one fails at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Control {
    /// Every heartbeat_ms: "I am alive, my subscriptions are at `version`".
    Heartbeat { node: String, node_id: u32, boot: u64, version: u64 },
    /// The full subscription snapshot: pattern and instance count.
    State { node: String, node_id: u32, boot: u64, version: u64, patterns: Vec<(String, u32)> },
    /// "`node`, publish your State": from a node that saw a version it lacks.
    Want { node: String },
    /// A node stopping: forget it now rather than at purge time.
    Bye { node: String, boot: u64 },
}

impl Control {
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn decode(bytes: &[u8]) -> Option<Control> {
        serde_json::from_slice(bytes).ok()
    }
}

/// The header of a data message: name length (1 byte), name, boot (8 bytes LE).
pub fn data_header(node: &str, boot: u64) -> Vec<u8> {
    let mut h = Vec::with_capacity(1 + node.len() + 8);
    h.push(node.len() as u8);
    h.extend_from_slice(node.as_bytes());
    h.extend_from_slice(&boot.to_le_bytes());
    h
}

/// Splits a data message into the sender's name, its boot and the frames.
pub fn parse_data(msg: &[u8]) -> Option<(&str, u64, &[u8])> {
    let (&len, rest) = msg.split_first()?;
    let len = len as usize;
    if rest.len() < len + 8 {
        return None;
    }
    let name = std::str::from_utf8(&rest[..len]).ok()?;
    let boot = u64::from_le_bytes(rest[len..len + 8].try_into().ok()?);
    Some((name, boot, &rest[len + 8..]))
}

/// One piece of an outbox to publish: a run of whole frames that fits in
/// `max` bytes, or one frame alone that does not fit.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece {
    Fits(Range<usize>),
    TooLarge(Range<usize>),
}

/// Cuts a buffer of length-prefixed frames into pieces of at most `max`
/// bytes, at frame boundaries. A frame over `max` is its own `TooLarge` piece
/// (no single message is split: the receiver would have to reassemble).
/// Stops at the first incomplete frame (the core never writes one).
pub fn split_frames(buf: &[u8], max: usize) -> Vec<Piece> {
    let mut out = Vec::new();
    let (mut start, mut at) = (0, 0);
    while let Ok(Some(n)) = cumulo_proto::next_frame_len(&buf[at..], u32::MAX) {
        if n > max {
            if at > start {
                out.push(Piece::Fits(start..at));
            }
            out.push(Piece::TooLarge(at..at + n));
            at += n;
            start = at;
            continue;
        }
        if at + n - start > max {
            out.push(Piece::Fits(start..at));
            start = at;
        }
        at += n;
    }
    if at > start {
        out.push(Piece::Fits(start..at));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(body_len: usize) -> Vec<u8> {
        let mut f = ((body_len + 1) as u32).to_le_bytes().to_vec();
        f.push(cumulo_proto::kind::PING);
        f.extend(std::iter::repeat_n(7u8, body_len));
        f
    }

    #[test]
    fn header_round_trips_and_short_input_is_refused() {
        let mut msg = data_header("node-b:7311", 42);
        msg.extend_from_slice(b"frames");
        assert_eq!(parse_data(&msg), Some(("node-b:7311", 42, &b"frames"[..])));
        assert_eq!(parse_data(&msg[..5]), None);
        assert_eq!(parse_data(&[]), None);
    }

    #[test]
    fn frames_are_packed_up_to_max_and_big_ones_stand_alone() {
        // frames of 15, 15, 105, 15 bytes (4-byte prefix, type, body)
        let sizes = [10, 10, 100, 10];
        let buf: Vec<u8> = sizes.iter().flat_map(|&n| frame(n)).collect();
        let pieces = split_frames(&buf, 40);
        assert_eq!(pieces, vec![Piece::Fits(0..30), Piece::TooLarge(30..135), Piece::Fits(135..150)]);
        assert_eq!(split_frames(&buf, 1000), vec![Piece::Fits(0..150)]);
        assert_eq!(
            split_frames(&buf, 15),
            vec![Piece::Fits(0..15), Piece::Fits(15..30), Piece::TooLarge(30..135), Piece::Fits(135..150)]
        );
    }

    #[test]
    fn control_messages_round_trip() {
        let c =
            Control::State { node: "a".into(), node_id: 1, boot: 9, version: 3, patterns: vec![("/x/*".into(), 2)] };
        assert_eq!(Control::decode(&c.encode()), Some(c));
        assert_eq!(Control::decode(b"{\"type\":\"nonsense\"}"), None);
    }
}
