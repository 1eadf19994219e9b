//! Unit tests of the session logic against a fake core: a real Unix socket
//! whose other end a thread of the test plays, frame by frame.

mod fake_core;
#[cfg(feature = "otel")]
mod otel;
mod send;
mod serve;
mod session;
mod trace;

use std::cell::Cell;

thread_local! {
    /// Frames decoded on this thread (`crate::decode_frame`).
    static DECODED: Cell<usize> = const { Cell::new(0) };
}

pub(crate) fn count_decode() {
    DECODED.with(|d| d.set(d.get() + 1));
}

/// Frames decoded on this thread so far.
pub(crate) fn decoded() -> usize {
    DECODED.with(|d| d.get())
}
