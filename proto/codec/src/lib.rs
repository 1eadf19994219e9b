//! cumulo wire protocol v1 (`proto/PROTOCOL.md`): the frame codec shared by
//! the core and the Rust SDK.
//!
//! Decoding borrows from the read buffer (no copies); encoding appends to a
//! caller-owned `Vec<u8>` so a connection can batch many frames per write.
#![forbid(unsafe_code)]

mod decode;
mod encode;
pub mod frame;
pub mod info;
pub mod status;
pub mod trans_id;

pub use decode::{decode, next_frame_len, DecodeError};
pub use encode::*;
pub use frame::*;
pub use status::Status;
pub use trans_id::{TransId, TransIdGen};

/// Protocol version spoken by this crate.
pub const VERSION: u16 = 1;

/// Default limit on one frame (type byte + body), bytes: large enough for
/// ordinary payloads, small enough that a bad length cannot make the core
/// allocate without bound. Configurable in the core (`max_frame`).
pub const DEFAULT_MAX_FRAME: u32 = 8 * 1024 * 1024;

/// How much larger than `max_frame` a frame from the core may be: a REQUEST
/// adds `source` (8 bytes) and `pattern` (2 + up to 65535 bytes) to what its
/// sender sent (PROTOCOL.md 2).
pub const REQUEST_OVERHEAD: u32 = 8 + 2 + 65535;

/// Bytes before the type byte: the `u32` length prefix.
pub const LEN_PREFIX: usize = 4;

#[cfg(test)]
mod vectors_tests;
