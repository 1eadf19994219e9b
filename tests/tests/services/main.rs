//! The internal services built as crates of their own, end to end: the
//! real core, real sockets from this process.

mod bridge;
